// Command callers prints what runtime.Caller and runtime.Callers report,
// and the names of method values, method expressions and closures. The
// functions on the printed stacks are too large to be split (docs/rules.md:
// a traced split function adds a frame).
package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
)

func where(skip int) string {
	pc, file, line, ok := runtime.Caller(skip)
	name := "?"
	if f := runtime.FuncForPC(pc); f != nil {
		name = f.Name()
	}
	if !ok {
		return "no caller"
	}
	return fmt.Sprintf("%s %s:%d", name, filepath.Base(file), line)
}

func stack() string {
	pcs := make([]uintptr, 16)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var parts []string
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "main.") {
			parts = append(parts, fmt.Sprintf("%s:%d", f.Function, f.Line))
		}
		if !more {
			break
		}
	}
	return strings.Join(parts, " <- ")
}

type T struct{ n int }

func (t T) Value(k int) string {
	s := where(1)
	if k > 100 {
		s += fmt.Sprint(t.n, k)
	}
	return fmt.Sprint(t.n+k, " ", s, " ", stack())
}

func (t *T) Pointer(k int) string {
	s := where(0)
	if k > 100 {
		s += fmt.Sprint(t.n, k)
	}
	return fmt.Sprint(t.n*k, " ", s, " ", stack())
}

// N is tiny: split, its traced copy must not add to T's method set.
func (t T) N() int { return t.n }

func methods(v interface{}) []string {
	var names []string
	typ := reflect.TypeOf(v)
	for i := 0; i < typ.NumMethod(); i++ {
		names = append(names, typ.Method(i).Name)
	}
	return names
}

func name(f interface{}) string {
	return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
}

func closures() []string {
	var out []string
	add := func(s string) { out = append(out, s) }
	add(where(0))
	func() {
		add(where(0))
		func() { add(stack()) }()
	}()
	add(name(add))
	return out
}

func main() {
	t := T{n: 4}
	fmt.Println(t.Value(2))
	fmt.Println(t.Pointer(3))
	mv := t.Value
	me := T.Value
	mp := (*T).Pointer
	fmt.Println(mv(1))
	fmt.Println(me(t, 5))
	fmt.Println(mp(&t, 6))
	fmt.Println(name(mv), name(me), name(mp), name(t.Pointer), name(where))
	for _, s := range closures() {
		fmt.Println(s)
	}
	fmt.Println(where(0))
	fmt.Println(methods(t), methods(&t), t.N())
}
