// Command exitreads returns results of every kind an exit probe reads
// through their addresses, and prints each call's results on stderr as
// usdt-toolexec trace prints them ("want main.f v1 v2 ..."), for
// TestTraceExitReads to compare. With the argument "paced" it waits 200 ms
// after each round of calls, for a tracer that reads events slowly.
package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unsafe"
)

type named struct{ s string }

func (n *named) String() string { return n.s }

//go:noinline
func narrow(n int) (a int16, b uint16, c bool) {
	return int16(-n), uint16(n * 1000), n%2 == 1
}

//go:noinline
func widths(n int) (f float32, u uint32, s []byte) {
	return float32(n) / 4, uint32(n) << 29, make([]byte, n)
}

//go:noinline
func ifaces(n int) (err error, st fmt.Stringer, p *int) {
	if n%2 == 1 {
		return errors.New("odd"), &named{"x"}, &n
	}
	return nil, nil, nil
}

// four has more results than one fire method reads through usdtAutoRead.
//
//go:noinline
func four(n int) (a, b int8, c uint8, d int64) {
	return int8(-n), int8(n), uint8(200 + n), int64(n) << 40
}

// label returns a string, which a Go fire function copies.
//
//go:noinline
func label(n int) (s string, k int32) {
	return strings.Repeat("ab", n), int32(-n)
}

func want(fn string, vals ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"want main." + fn}, vals...)...)
}

func main() {
	for n := 1; n <= 4; n++ {
		a, b, c := narrow(n)
		want("narrow", a, b, c)
		f, u, s := widths(n)
		// A []byte shows as the string it holds, quoted.
		want("widths", math.Float32bits(f), u, fmt.Sprintf("%q", s))
		err, st, p := ifaces(n)
		// The tracer shows an error's message, an interface of a type
		// it does not read as its type and its data word, and a
		// pointer as what it points to.
		stText, pText := "<nil>", "<nil>"
		if st != nil {
			stText = fmt.Sprintf("(%T)%#x", st, uintptr(unsafe.Pointer(st.(*named))))
		}
		if p != nil {
			pText = fmt.Sprintf("&%d", *p)
		}
		want("ifaces", err, stText, pText)
		w, x, y, z := four(n)
		want("four", w, x, y, z)
		l, k := label(n)
		want("label", fmt.Sprintf("%q", l), k)
		if len(os.Args) > 1 && os.Args[1] == "paced" {
			time.Sleep(200 * time.Millisecond)
		}
	}
}
