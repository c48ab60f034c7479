// Package regabi says where Go's register-based calling convention
// (ABIInternal, see the Go source's src/cmd/compile/abi-internal.md) puts
// a function's receiver and parameters when its first instruction runs,
// and its results when it returns: the argument specs of a note that
// points into the function's own code (rules' sites: notes).
//
// Each value is assigned in order, to as many integer and floating-point
// registers as its parts need, or, if they run out or the value cannot
// be split into registers, to the stack, giving its registers back.
package regabi

import (
	"go/types"
)

// Loc is where one value is.
type Loc struct {
	// Ints are the integer registers holding the value's words, in the
	// notes' spelling ("%rax", "x0"); Floats counts the floating-point
	// registers it takes. A value with neither is on the stack, or has
	// no size.
	Ints   []string
	Floats int
	// Stack says the value is in memory, on the stack.
	Stack bool
}

var intRegs = map[string][]string{
	"amd64": {"%rax", "%rbx", "%rcx", "%rdi", "%rsi", "%r8", "%r9", "%r10", "%r11"},
	"arm64": {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15"},
}

var floatRegs = map[string]int{"amd64": 15, "arm64": 16}

// Assign gives the locations of values of types ts, passed in order as
// one call's arguments, or returned as its results, on arch.
func Assign(arch string, ts []types.Type) []Loc {
	a := assigner{ints: intRegs[arch], floats: floatRegs[arch]}
	locs := make([]Loc, len(ts))
	for i, t := range ts {
		ni, nf := a.ni, a.nf
		if a.assign(t) {
			locs[i] = Loc{Ints: a.ints[ni:a.ni], Floats: a.nf - nf}
			continue
		}
		a.ni, a.nf = ni, nf
		locs[i] = Loc{Stack: true}
	}
	return locs
}

type assigner struct {
	ints           []string
	floats, ni, nf int
}

// assign takes registers for t's parts and reports whether there were
// enough, and t could be split.
func (a *assigner) assign(t types.Type) bool {
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Kind() == types.String:
			return a.int(2)
		case u.Info()&types.IsComplex != 0:
			return a.float(2)
		case u.Info()&types.IsFloat != 0:
			return a.float(1)
		}
		return a.int(1)
	case *types.Pointer, *types.Map, *types.Chan, *types.Signature:
		return a.int(1)
	case *types.Slice:
		return a.int(3)
	case *types.Interface:
		return a.int(2)
	case *types.Array:
		switch u.Len() {
		case 0:
			return true
		case 1:
			return a.assign(u.Elem())
		}
		return false
	case *types.Struct:
		for i := range u.NumFields() {
			if !a.assign(u.Field(i).Type()) {
				return false
			}
		}
		return true
	}
	// A type parameter: its shape decides, which one function's
	// instantiations do not share.
	return false
}

func (a *assigner) int(n int) bool {
	if a.ni+n > len(a.ints) {
		return false
	}
	a.ni += n
	return true
}

func (a *assigner) float(n int) bool {
	if a.nf+n > a.floats {
		return false
	}
	a.nf += n
	return true
}
