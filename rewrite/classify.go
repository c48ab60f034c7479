package rewrite

import (
	"go/types"

	"github.com/go-usdt/usdt/internal/probe"
)

// basic maps each basic type to the kind it is passed as and the function
// that converts a value to it: a conversion for integers, bool and
// strings (which also strips named types), a helper for the rest.
var basic = map[types.BasicKind]struct {
	kind probe.Kind
	conv string
}{
	types.Bool:          {probe.Bool, "bool"},
	types.Int8:          {probe.Int8, "int8"},
	types.Uint8:         {probe.Uint8, "uint8"},
	types.Int16:         {probe.Int16, "int16"},
	types.Uint16:        {probe.Uint16, "uint16"},
	types.Int32:         {probe.Int32, "int32"},
	types.Uint32:        {probe.Uint32, "uint32"},
	types.Int:           {probe.Int64, "int64"},
	types.Int64:         {probe.Int64, "int64"},
	types.Uint:          {probe.Uint64, "uint64"},
	types.Uint64:        {probe.Uint64, "uint64"},
	types.Uintptr:       {probe.Uintptr, "uintptr"},
	types.String:        {probe.String, "string"},
	types.UnsafePointer: {probe.Pointer, "Pointer"},
}

// convert says how a value of type t reaches a probe: the kind the stub
// takes and the expression, in the instrumented function, that produces it
// from the variable name. Values that do not fit a register are passed as a
// constant 0 so that later arguments keep their positions (README, "Probe
// contract"). The expression names no predeclared identifier (see
// hygienic).
func (g *generator) convert(t types.Type, name string) (probe.Kind, string) {
	return convertNamed(t, name, g.typ, g.prefix)
}

// convertNamed is convert with typ naming predeclared types and prefix
// starting generated identifiers.
func convertNamed(t types.Type, name string, typ func(string) string, prefix string) (probe.Kind, string) {
	if _, ok := t.(*types.TypeParam); ok {
		return probe.Uint64, "0"
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		if b, ok := basic[u.Kind()]; ok {
			if u.Kind() == types.UnsafePointer {
				return b.kind, prefix + b.conv + "(" + name + ")"
			}
			return b.kind, typ(b.conv) + "(" + name + ")"
		}
		// Floats travel as their bits; named float types need converting
		// to the helper's parameter type first.
		switch u.Kind() {
		case types.Float32:
			return probe.Uint32, prefix + "F32(" + typ("float32") + "(" + name + "))"
		case types.Float64:
			return probe.Uint64, prefix + "F64(" + typ("float64") + "(" + name + "))"
		}
	case *types.Pointer:
		return probe.Pointer, prefix + "Pointer(" + name + ")"
	case *types.Map, *types.Chan, *types.Signature:
		return probe.Pointer, prefix + "Data(" + name + ")"
	case *types.Interface:
		return probe.Pointer, prefix + "Type(" + name + ")"
	case *types.Slice:
		return probe.Int64, prefix + "Len(" + name + ")"
	}
	return probe.Uint64, "0"
}

// convertAt is convert for a value read through p, an expression of type
// unsafe.Pointer that points at it: exit probes read the results that way
// when they fire, after the function has set them. It returns false for
// values passed as the constant 0, which need no pointer. The expression is
// for the generated file, in canonical names.
func convertAt(t types.Type, p string) (probe.Kind, string, bool) {
	k, e := convertNamed(t, "v", func(name string) string { return name }, canonical)
	if e == "0" {
		return k, e, false
	}
	load := func(goType string) string { return "*(*" + goType + ")(" + p + ")" }
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch u.Kind() {
		case types.Float32:
			return k, load("uint32"), true
		case types.Float64:
			return k, load("uint64"), true
		}
		// int and uint are 64 bits wide on every supported GOARCH.
		return k, load(k.GoType()), true
	case *types.Pointer, *types.Map, *types.Chan, *types.Signature:
		return k, load("unsafe.Pointer"), true
	case *types.Interface:
		if u.Empty() {
			return k, load("unsafe.Pointer"), true
		}
		return k, "usdtAutoItabType(" + p + ")", true
	case *types.Slice:
		return k, "int64((*[3]int)(" + p + ")[1])", true
	}
	return k, "0", false
}
