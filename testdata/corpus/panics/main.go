// Command panics panics, recovers, re-panics, runs Goexit and ends with
// os.Exit called from a deferred function.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
)

func divide(a, b int) (q int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered: %v", r)
			q = -1
		}
	}()
	return a / b, nil
}

func named() (n int) {
	defer func() { n *= 3 }()
	n = 2
	return n + 1
}

func repanic() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("second: %v", r)
		}
	}()
	defer func() {
		r := recover()
		panic(fmt.Sprintf("again after %v", r))
	}()
	panic("first")
}

var errSentinel = errors.New("sentinel")

func panicErr() { panic(errSentinel) }

func catchErr() (caught bool) {
	defer func() { caught = recover() == errSentinel }()
	panicErr()
	return false
}

func goexit(wg *sync.WaitGroup, out *[]string) {
	defer wg.Done()
	defer func() { *out = append(*out, fmt.Sprint("recover in Goexit: ", recover())) }()
	runtime.Goexit()
}

func nested(depth int) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprint("caught at ", depth, ": ", r)
		}
	}()
	if depth == 0 {
		panic("bottom")
	}
	if depth == 2 {
		return nested(depth - 1)
	}
	inner(depth - 1)
	return "unreached"
}

func inner(depth int) { nested(depth); panic(fmt.Sprint("inner ", depth)) }

func main() {
	fmt.Println(divide(7, 2))
	fmt.Println(divide(1, 0))
	fmt.Println(named())
	fmt.Println(repanic())
	fmt.Println(catchErr())
	var wg sync.WaitGroup
	var out []string
	wg.Add(1)
	go goexit(&wg, &out)
	wg.Wait()
	fmt.Println(out)
	fmt.Println(nested(3))
	defer func() {
		fmt.Println("exiting from a deferred call")
		os.Exit(3)
	}()
	defer fmt.Println("deferred before the exit")
	panic("unrecovered in main")
}
