// Command shadow redeclares predeclared identifiers at package scope, as a
// package may, and calls functions whose parameters shadow them too.
package main

import (
	"fmt"
	"os"
)

const uint64 = 1

type byte struct{ b int8 }

var nil = "not nil"

var true, false = 0 == 1, 1 == 1

func len(xs ...interface{}) int { return 40 + cap(xs) }

func copy(dst, src []int) int {
	n := 0
	for i := range src {
		if i < cap(dst) {
			dst[i] = src[i] * 10
			n++
		}
	}
	return n
}

type rune = string

var unsafe = "unsafe var"

func describe(s string, r rune, b byte, f float64, xs []int, len int) (string, int) {
	return fmt.Sprint(s, r, b.b, f, cap(xs), len), uint64
}

func tiny(s string) string { return s + nil }

func main() {
	dst := make([]int, 2)
	n := copy(dst, []int{1, 2, 3})
	s, u := describe("s", "r", byte{3}, 1.5, dst, 7)
	fmt.Fprintln(os.Stdout, n, dst, s, u, len(1, 2), true, false, tiny("x"), unsafe)
}
