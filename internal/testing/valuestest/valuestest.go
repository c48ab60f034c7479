// Package valuestest lets tests decode Go values of their own process as
// the tracer decodes a traced program's: it makes a values.Plan's copies
// from this process's memory, as the tracer's BPF program makes them from
// the traced one's, and gives the layout of a Go type from its reflect
// type, as usdt-toolexec computes it from go/types.
package valuestest

import (
	"encoding/binary"
	"math"
	"os"
	"reflect"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/values"
)

// Read makes the plan's copies for arguments that hold args, from
// /proc/self/mem, into a value area of the size the tracer's events
// have: what a nil pointer or a fault leaves is zeros, as with the BPF
// program's reads, and a read that faults sets its bit in the area's
// status word, as they do.
func Read(p *values.Plan, args []uint64) ([]byte, error) {
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	area := make([]byte, values.AreaSize+values.OpMax)
	word := func(at uint16) uint64 { return binary.LittleEndian.Uint64(area[at:]) }
	for j, op := range p.Ops {
		var from uint64
		n := uint64(op.Max)
		switch op.From {
		case values.FromArg:
			if int(op.Arg) < len(args) {
				from = args[op.Arg]
			}
		case values.FromPtr:
			from = word(op.Src)
		case values.FromSlice:
			from, n = word(op.Src), min(n, word(op.Src+8)*uint64(op.Elem))
		}
		if from == 0 || from > math.MaxInt64 {
			continue
		}
		dst := area[op.Dst : int(op.Dst)+int(n)]
		if _, err := mem.ReadAt(dst, int64(from)); err != nil {
			clear(dst)
			binary.LittleEndian.PutUint32(area, binary.LittleEndian.Uint32(area)|1<<j)
		}
	}
	return area, nil
}

// Layout is the layout of values of t, to the depth internal/layout
// goes: past it, what a pointer, a slice or an array holds and a
// struct's fields are left out, as there.
func Layout(t reflect.Type) *layout.Type {
	return layoutOf(t, layout.MaxDepth)
}

func layoutOf(t reflect.Type, depth int) *layout.Type {
	l := &layout.Type{Kind: kinds[t.Kind()], Size: int64(t.Size())}
	if t.Name() != "" {
		l.Name = t.String()
	}
	if depth == 0 {
		return l
	}
	switch t.Kind() {
	case reflect.Interface:
		if t.NumMethod() == 0 {
			l.Kind = layout.Eface
		}
	case reflect.Pointer, reflect.Slice:
		l.Elem = layoutOf(t.Elem(), depth-1)
	case reflect.Array:
		l.Elem, l.Len = layoutOf(t.Elem(), depth-1), int64(t.Len())
	case reflect.Struct:
		for i := range min(t.NumField(), layout.MaxFields) {
			f := t.Field(i)
			l.Fields = append(l.Fields, layout.Field{Name: f.Name, Offset: int64(f.Offset), Embedded: f.Anonymous, Type: layoutOf(f.Type, depth-1)})
		}
		l.Cut = t.NumField() > layout.MaxFields
	case reflect.Map:
		if t.Key().Size() > layout.MapMaxSlotBytes || t.Elem().Size() > layout.MapMaxSlotBytes {
			break
		}
		// A slot of the map's groups: its key, then its elem, laid out
		// as a struct of the two.
		slot := reflect.StructOf([]reflect.StructField{{Name: "Key", Type: t.Key()}, {Name: "Elem", Type: t.Elem()}})
		l.Elem = layoutOf(slot, depth)
		l.Elem.Fields[0].Name, l.Elem.Fields[1].Name = "key", "elem"
	}
	return l
}

var kinds = map[reflect.Kind]layout.Kind{
	reflect.Bool: layout.Bool,
	reflect.Int:  layout.Int, reflect.Int8: layout.Int, reflect.Int16: layout.Int, reflect.Int32: layout.Int, reflect.Int64: layout.Int,
	reflect.Uint: layout.Uint, reflect.Uint8: layout.Uint, reflect.Uint16: layout.Uint, reflect.Uint32: layout.Uint, reflect.Uint64: layout.Uint, reflect.Uintptr: layout.Uint,
	reflect.Float32: layout.Float, reflect.Float64: layout.Float, reflect.Complex64: layout.Complex, reflect.Complex128: layout.Complex,
	reflect.String: layout.String, reflect.Pointer: layout.Pointer, reflect.UnsafePointer: layout.UnsafePointer,
	reflect.Struct: layout.Struct, reflect.Array: layout.Array, reflect.Slice: layout.Slice, reflect.Map: layout.Map,
	reflect.Chan: layout.Chan, reflect.Func: layout.Func, reflect.Interface: layout.Iface,
}
