package layout

import "time"

// The types TestOf checks. The test type-checks this file with go/types
// and compares the layouts with what the compiler made of the same
// declarations (reflect): the expected offsets and sizes are the
// compiler's, not the code's under test.

type Addr struct {
	City string
	Zip  int32
}

type Base struct{ ID int64 }

type Order struct {
	Base
	Name   string
	Ship   *Addr
	Paid   bool
	Weight float64
	When   time.Time
	Tags   []string
	Err    error
	Any    any
	Counts map[string]int
	Grid   [3]int16
}

type Node struct {
	V    int
	Next *Node
}

type Maps struct {
	Counts map[string]int
	Names  map[int]string
	Places map[string]Addr
	Flags  map[int8]int64
	Wide   map[Addr]bool
	Big    map[string][200]byte
}
