// Command values calls functions with struct, pointer, map, interface,
// error, time and slice arguments and results, and prints to stderr, for
// each value of each call, what Go itself makes of it: %+v ("want"),
// encoding/json ("json"), and for every pointer in it, the %+v of what it
// points to ("ptr"), which %+v shows as an address inside a struct or a
// slice. A test compares the tracer's values with these. A []byte, which
// Go prints as numbers and encoding/json as base64, the tracer shows as
// the string it holds, quoted: for those the fixture prints that by hand.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
)

type Addr struct {
	City string
	Zip  int32
}

type Base struct {
	ID   int64
	Kind uint8
}

type Order struct {
	Base
	Name   string
	Ship   *Addr
	Paid   bool
	Weight float64
	Items  []int
	Wait   time.Duration
}

type Pair[K comparable, V any] struct {
	Key K
	Val V
}

type Node struct {
	V    int
	Next *Node
}

// Label is a fmt.Stringer that %+v prints through its String method.
type Label string

func (l Label) String() string { return string(l) }

//go:noinline
func Place(o Order, when time.Time) (Order, error) {
	if o.Ship == nil {
		return Order{}, errors.New("no address")
	}
	o.ID++
	return o, nil
}

// Ship returns its error from a deferred exit probe's reads.
//
//go:noinline
func Ship(a *Addr, days [3]int16) (err error) {
	if a.Zip == 0 {
		return fmt.Errorf("ship to %s: %w", a.City, errors.New("no zip"))
	}
	return nil
}

//go:noinline
func Open(path string) error {
	f, err := os.Open(path)
	if err == nil {
		f.Close()
	}
	return err
}

//go:noinline
func Describe(v fmt.Stringer, x any) string { return fmt.Sprint(v, x) }

//go:noinline
func Swap(p Pair[string, int]) Pair[string, int] { return p }

//go:noinline
func Walk(n *Node) int { return n.V }

//go:noinline
func Big(a [100]int64) int64 { return a[99] }

//go:noinline
func Count(m map[string]int) int { return len(m) }

//go:noinline
func Names(m map[int]string) int { return len(m) }

//go:noinline
func Stock(m map[string]Addr) int { return len(m) }

//go:noinline
func Nils(p *Addr, e error) bool { return p == nil && e == nil }

// Echo's T reaches its probes in an interface, made when they fire.
//
//go:noinline
func Echo[T any](v T) T { return v }

// Keep returns its T from a deferred exit probe's reads.
//
//go:noinline
func Keep[T any](v T) (r T) {
	r = v
	return r
}

//go:noinline
func Hold(x any) any { return x }

//go:noinline
func Tail(xs []int) []int {
	if len(xs) == 0 {
		return xs
	}
	return xs[1:]
}

//go:noinline
func Chop(b []byte) []byte { return b[:len(b)-1] }

//go:noinline
func Cities(as []Addr) []string {
	var cities []string
	for _, a := range as {
		cities = append(cities, a.City)
	}
	return cities
}

//go:noinline
func First(as []*Addr) *Addr { return as[0] }

// Total's []T has elements of a size the generic code does not know:
// the tracer reads its length only.
//
//go:noinline
func Total[T ~int | ~int64](xs []T) T {
	var t T
	for _, x := range xs {
		t += x
	}
	return t
}

// kept holds Later's closure, which captures xs by value as long as
// nothing takes xs's address.
var kept func() int

//go:noinline
func Later(xs []int) int {
	kept = func() int { return len(xs) }
	return kept()
}

func value(fn, name string, v any) {
	fmt.Fprintf(os.Stderr, "want %s %s %+v\n", fn, name, v)
	if err, ok := v.(error); ok {
		v = err.Error()
	}
	// A cycle has no JSON.
	if b, err := json.Marshal(v); err == nil {
		fmt.Fprintf(os.Stderr, "json %s %s %s\n", fn, name, b)
	}
	pointers(reflect.ValueOf(v), map[uintptr]bool{})
}

// past marks the value printed last as past the tracer's read budget
// (docs/tracing.md): it shows the first shown elements of a list, then
// its length; of a map larger than a group, its length alone (shown 0).
// Only a value marked so may be cut, and by exactly as much.
func past(shown int) { fmt.Fprintf(os.Stderr, "past %d\n", shown) }

// shown prints what the tracer shows of a value that Go prints
// otherwise, text (unquoted, as the test reads a quoted one) and JSON
// written by hand.
func shown(fn, name, text, json string) {
	fmt.Fprintf(os.Stderr, "want %s %s %s\njson %s %s %s\n", fn, name, text, fn, name, json)
}

// pointers prints what each pointer reachable from v points to.
func pointers(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Slice:
		for i := range v.Len() {
			pointers(v.Index(i), seen)
		}
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		fmt.Fprintf(os.Stderr, "ptr %#x %+v\n", v.Pointer(), v.Elem().Interface())
		pointers(v.Elem(), seen)
	case reflect.Struct:
		for i := range v.NumField() {
			pointers(v.Field(i), seen)
		}
	}
}

func main() {
	when := time.Date(2026, 11, 25, 10, 30, 0, 123456789, time.UTC)
	lyon := &Addr{City: "Lyon", Zip: 69001}
	o := Order{Base: Base{ID: 41, Kind: 3}, Name: "Zoë's order", Ship: lyon, Paid: true, Weight: 2.5,
		Items: []int{7, 8, 9, 10}, Wait: 1500 * time.Millisecond}
	r, err := Place(o, when)
	value("main.Place", "o", o)
	value("main.Place", "when", when.Format(time.RFC3339Nano))
	value("main.Place=", "r1", r)
	value("main.Place=", "r2", err)

	none := Order{Base: Base{ID: 7}}
	r, err = Place(none, when.Add(time.Hour))
	value("main.Place", "o", none)
	value("main.Place", "when", when.Add(time.Hour).Format(time.RFC3339Nano))
	value("main.Place=", "r1", r)
	value("main.Place=", "r2", err)

	nowhere := &Addr{City: "Nowhere"}
	days := [3]int16{1, -2, 3}
	err = Ship(nowhere, days)
	value("main.Ship", "a", nowhere)
	value("main.Ship", "days", days)
	value("main.Ship=", "err", err)

	err = Open("/nonexistent/file.txt")
	value("main.Open", "path", "/nonexistent/file.txt")
	value("main.Open=", "r1", err)

	s := Describe(Label("express"), 42)
	value("main.Describe", "v", Label("express"))
	value("main.Describe", "x", 42)
	value("main.Describe=", "r1", s)

	p := Swap(Pair[string, int]{"k", 5})
	value("main.Swap", "p", Pair[string, int]{"k", 5})
	value("main.Swap=", "r1", p)

	a := &Node{V: 1}
	a.Next = &Node{V: 2, Next: a}
	w := Walk(a)
	value("main.Walk", "n", a)
	value("main.Walk=", "r1", w)

	var big [100]int64
	for i := range big {
		big[i] = int64(i * i)
	}
	b := Big(big)
	value("main.Big", "a", big)
	past(16)
	value("main.Big=", "r1", b)

	many := map[string]int{}
	for i := range 100 {
		many[fmt.Sprint("k", i)] = i
	}
	for _, m := range []map[string]int{{"c": 3, "a": 1, "b": 2}, {}, nil, many} {
		c := Count(m)
		value("main.Count", "m", m)
		if len(m) > 8 {
			past(0)
		}
		value("main.Count=", "r1", c)
	}
	names := map[int]string{10: "ten", -2: "minus two", 3: "three"}
	c := Names(names)
	value("main.Names", "m", names)
	value("main.Names=", "r1", c)
	stock := map[string]Addr{"lyon": {City: "Lyon", Zip: 69001}, "paris": {City: "Paris", Zip: 75001}}
	c = Stock(stock)
	value("main.Stock", "m", stock)
	value("main.Stock=", "r1", c)

	n := Echo(69001)
	value("main.Echo", "v", 69001)
	value("main.Echo=", "r1", n)
	z := Echo("Zoë")
	value("main.Echo", "v", "Zoë")
	value("main.Echo=", "r1", z)
	paris := Addr{City: "Paris", Zip: 75001}
	e := Echo(paris)
	value("main.Echo", "v", paris)
	value("main.Echo=", "r1", e)
	k := Keep(paris)
	value("main.Keep", "v", paris)
	value("main.Keep=", "r", k)
	kn := Keep(int16(-7))
	value("main.Keep", "v", int16(-7))
	value("main.Keep=", "r", kn)
	h := Hold(Base{ID: 9, Kind: 2})
	value("main.Hold", "x", Base{ID: 9, Kind: 2})
	value("main.Hold=", "r1", h)

	var nilAddr *Addr
	var nilErr error
	ok := Nils(nilAddr, nilErr)
	value("main.Nils", "p", nilAddr)
	value("main.Nils", "e", nilErr)
	value("main.Nils=", "r1", ok)

	long := make([]int, 40)
	for i := range long {
		long[i] = i * 3
	}
	for _, xs := range [][]int{{7, 8, 9, 10}, nil, {}, long} {
		r := Tail(xs)
		value("main.Tail", "xs", xs)
		if len(xs) > 16 {
			past(16)
		}
		value("main.Tail=", "r1", r)
		if len(r) > 16 {
			past(16)
		}
	}

	// Up to 64 bytes of a []byte are read, and the rest counted.
	Chop([]byte("héllo!"))
	shown("main.Chop", "b", "héllo!", `"héllo!"`)
	shown("main.Chop=", "r1", "héllo", `"héllo"`)
	Chop([]byte("caf\xe9\x00!"))
	shown("main.Chop", "b", "caf\xe9\x00!", `"caf\\xe9\\x00!"`)
	shown("main.Chop=", "r1", "caf\xe9\x00", `"caf\\xe9\\x00"`)
	Chop([]byte(strings.Repeat("0123456789", 10)))
	shown("main.Chop", "b", `"`+strings.Repeat("0123456789", 6)+`0123"...(100 bytes)`, `"`+strings.Repeat("0123456789", 6)+`0123...(100 bytes)"`)
	shown("main.Chop=", "r1", `"`+strings.Repeat("0123456789", 6)+`0123"...(99 bytes)`, `"`+strings.Repeat("0123456789", 6)+`0123...(99 bytes)"`)

	as := []Addr{{City: "Lyon", Zip: 69001}, {City: "Paris", Zip: 75001}, {City: "Nice"}}
	cities := Cities(as)
	value("main.Cities", "as", as)
	value("main.Cities=", "r1", cities)

	ptrs := []*Addr{lyon, nil, &as[1]}
	first := First(ptrs)
	value("main.First", "as", ptrs)
	value("main.First=", "r1", first)

	l := Later([]int{4, 5})
	value("main.Later", "xs", []int{4, 5})
	value("main.Later=", "r1", l)

	tot := Total([]int64{1, 2, 3})
	shown("main.Total", "xs", "[...(len 3)]", `"[...(len 3)]"`)
	value("main.Total=", "r1", tot)
}
