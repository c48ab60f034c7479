// Command initorder prints the order its package variables and init
// functions run in: the spec orders them by dependencies, then by
// declaration order across the files as the compiler receives them.
package main

import "fmt"

var trace []string

func note(s string) int { trace = append(trace, s); return len(trace) }

var x = 0
var a = foo()
var b = x

func foo() int { x++; return x }

var c = note("c") + fromB

func init() { note("init a.go") }

func main() {
	fmt.Println("a", a, "b", b, "c", c, "d", d, "e", e, "z", z)
	fmt.Println(trace)
}
