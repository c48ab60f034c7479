package rewrite

import (
	"fmt"
	"go/types"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/probe"
)

// basic maps each basic type to the kind it is passed as.
var basic = map[types.BasicKind]probe.Kind{
	types.Bool:          probe.Bool,
	types.Int8:          probe.Int8,
	types.Uint8:         probe.Uint8,
	types.Int16:         probe.Int16,
	types.Uint16:        probe.Uint16,
	types.Int32:         probe.Int32,
	types.Uint32:        probe.Uint32,
	types.Int:           probe.Int64,
	types.Int64:         probe.Int64,
	types.Uint:          probe.Uint64,
	types.Uint64:        probe.Uint64,
	types.Uintptr:       probe.Uintptr,
	types.String:        probe.String,
	types.UnsafePointer: probe.Pointer,
	types.Float32:       probe.Uint32, // its bits
	types.Float64:       probe.Uint64,
}

// convert says how a value of type t reaches a probe: the kind the note
// gives it and the expression, in the instrumented function, that produces
// it from the variable name. The expression is a string for a string and a
// uint64 for everything else, extended from a narrower value as its kind's
// sign says, so that probes of different kinds share fire functions (see
// asmgen.Symbols). A struct, an array, a slice or an interface is passed
// as the address of the variable that holds it, which the tracer reads
// through the layout the probe table records (see generator.arg), and
// bpftrace a slice's length from its header's second word; a value of a
// type parameter, as the address of an interface holding it (see boxed):
// name is then that interface. Complex numbers are passed as a constant 0
// so that later arguments keep their positions (docs/rules.md, "The probe
// contract"). The expression names no predeclared identifier (see
// hygienic).
func (g *generator) convert(t types.Type, name string) (probe.Kind, string) {
	return convertNamed(t, name, g.typ, g.prefix)
}

// convertNamed is convert with typ naming predeclared types and prefix
// starting generated identifiers.
func convertNamed(t types.Type, name string, typ func(string) string, prefix string) (probe.Kind, string) {
	if boxed(t) {
		t = emptyInterface
	}
	if byAddress(t) {
		// The address does not make the value escape: it reaches the
		// trampoline as a number, and only while traced.
		return probe.Pointer, prefix + "Word(" + prefix + "Pointer(&" + name + "))"
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		k, ok := basic[u.Kind()]
		if !ok {
			break
		}
		// Conversions to the predeclared type first strip named types.
		switch u.Kind() {
		case types.String:
			return k, typ("string") + "(" + name + ")"
		case types.Bool:
			return k, prefix + "Bool(" + typ("bool") + "(" + name + "))"
		case types.UnsafePointer:
			return k, prefix + "Word(" + prefix + "Pointer(" + name + "))"
		case types.Float32:
			return k, prefix + "F32(" + typ("float32") + "(" + name + "))"
		case types.Float64:
			return k, prefix + "F64(" + typ("float64") + "(" + name + "))"
		}
		return k, typ("uint64") + "(" + name + ")"
	case *types.Pointer:
		return probe.Pointer, prefix + "Word(" + prefix + "Pointer(" + name + "))"
	case *types.Map, *types.Chan, *types.Signature:
		return probe.Pointer, prefix + "Data(" + name + ")"
	}
	return probe.Uint64, "0"
}

// emptyInterface is interface{}.
var emptyInterface = types.NewInterfaceType(nil, nil)

// boxed says a value of type t reaches probes as the address of an
// interface{} holding it, made in the traced branch: t is a type
// parameter. The generic code knows neither the value's size nor its
// layout, but the conversion takes the type's descriptor from the
// instantiation's dictionary, and the tracer reads the interface as any
// other: its dynamic type and value. The interface's address is passed as
// a number, so it escapes nowhere and its data stays on the stack. (The
// conversion makes the linker keep the methods of the instantiating types
// that some interface could call, as any conversion of them would.)
func boxed(t types.Type) bool {
	_, ok := types.Unalias(t).(*types.TypeParam)
	return ok
}

// boxLayout is the layout of a boxed value.
var boxLayout = &layout.Type{Kind: layout.Eface, Size: 16}

// byAddress says a value of type t, not boxed, reaches probes as its
// address.
func byAddress(t types.Type) bool {
	if boxed(t) {
		return false
	}
	switch t.Underlying().(type) {
	case *types.Struct, *types.Array, *types.Slice, *types.Interface:
		return true
	}
	return false
}

// A read is how an exit probe reads a result through its address.
type read int

const (
	readWord read = iota // the 64-bit word it is
	readU8
	readU16
	readU32
	readAddr   // its address: a struct, an array, a slice or an interface
	readString // a string, which a Go fire function copies
	readBox    // a value of a type parameter, boxed when the probe fires (see boxed)
)

// readZero is no read: the probe passes the constant 0.
const readZero read = -1

// An exit probe's deferred call holds its site with the reads of up to
// maxSharedReads results above it, readBits each from bit readShift, so
// that one fire method serves every function whose results are as many
// words, whatever their types (see usdtAutoRead). The value stays below
// 1<<31: an immediate operand, where a 64-bit one would take 5 more bytes
// in every function.
const (
	readBits       = 3
	readShift      = 22
	maxSharedReads = 3
)

// expr reads the value p, an expression of type unsafe.Pointer, points at.
func (r read) expr(p string) string {
	switch r {
	case readU8, readU16, readU32:
		return fmt.Sprintf("uint64(*(*uint%d)(%s))", 8<<(r-readU8), p)
	case readString:
		return "*(*string)(" + p + ")"
	case readAddr:
		return "usdtAutoWord(" + p + ")"
	}
	return "*(*uint64)(" + p + ")"
}

// convertAt is convert for a value read through its address: exit probes
// read the results that way when they fire, after the function has set
// them. It returns false for values passed as the constant 0, which need
// no address. A value of a type parameter is boxed by the fire method, from
// the typed pointer the deferred call holds: boxing it when the call is
// deferred would show the value at entry, not the one returned. A narrow value is read zero-extended whatever its sign: the
// note's size says how much of the register a tracer reads, and its sign
// how to extend that.
func convertAt(t types.Type) (probe.Kind, read, bool) {
	if boxed(t) {
		return probe.Pointer, readBox, true
	}
	k, e := convertNamed(t, "v", func(name string) string { return name }, canonical)
	if e == "0" {
		return k, readWord, false
	}
	if byAddress(t) {
		return k, readAddr, true
	}
	if u, ok := t.Underlying().(*types.Basic); ok && u.Kind() == types.String {
		return k, readString, true
	}
	// The rest is read as the word or narrower integer it is: int, uint
	// and pointers (maps, channels and funcs too) are 64 bits wide on
	// every supported GOARCH, and floats are read as their bits.
	switch k.Size() {
	case 1:
		return k, readU8, true
	case 2:
		return k, readU16, true
	case 4:
		return k, readU32, true
	}
	return k, readWord, true
}
