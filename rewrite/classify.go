package rewrite

import (
	"go/types"

	"github.com/go-usdt/usdt/internal/probe"
)

// convert says how a value of type t reaches a probe: the kind the stub
// takes and the expression, in the instrumented function, that produces it
// from the variable name. Values that do not fit a register are passed as a
// constant 0 so that later arguments keep their positions (README, "Probe
// contract").
func convert(t types.Type, name string) (probe.Kind, string) {
	if _, ok := t.(*types.TypeParam); ok {
		return probe.Uint64, "0"
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch u.Kind() {
		case types.Bool:
			return probe.Bool, "bool(" + name + ")"
		case types.Int8:
			return probe.Int8, "int8(" + name + ")"
		case types.Uint8:
			return probe.Uint8, "uint8(" + name + ")"
		case types.Int16:
			return probe.Int16, "int16(" + name + ")"
		case types.Uint16:
			return probe.Uint16, "uint16(" + name + ")"
		case types.Int32:
			return probe.Int32, "int32(" + name + ")"
		case types.Uint32:
			return probe.Uint32, "uint32(" + name + ")"
		case types.Int, types.Int64:
			return probe.Int64, "int64(" + name + ")"
		case types.Uint, types.Uint64:
			return probe.Uint64, "uint64(" + name + ")"
		case types.Uintptr:
			return probe.Uintptr, "uintptr(" + name + ")"
		case types.Float32:
			return probe.Uint32, "usdtAutoF32(float32(" + name + "))"
		case types.Float64:
			return probe.Uint64, "usdtAutoF64(float64(" + name + "))"
		case types.String:
			return probe.String, "string(" + name + ")"
		case types.UnsafePointer:
			return probe.Pointer, "usdtAutoData(" + name + ")"
		}
	case *types.Pointer, *types.Map, *types.Chan, *types.Signature:
		return probe.Pointer, "usdtAutoData(" + name + ")"
	case *types.Interface:
		return probe.Pointer, "usdtAutoType(" + name + ")"
	case *types.Slice:
		return probe.Int64, "int64(len(" + name + "))"
	}
	return probe.Uint64, "0"
}
