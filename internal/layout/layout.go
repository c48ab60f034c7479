// Package layout describes how Go values lie in memory: what the build
// knows of a probe argument's type (computed with go/types for the
// target architecture) and writes into the probe table, so that a tracer
// can read the value from the traced process, stripped binaries included,
// without DWARF.
//
// A layout is bounded: past MaxDepth levels of pointers, maps, elements and
// fields, MaxFields fields in one struct, or MaxTypes types in all, a
// type keeps its kind and size only, and a tracer shows such a value as its address (a pointer)
// or not at all.
package layout

import (
	"encoding/json"
	"fmt"
	"go/types"
)

// Kind is the shape of a value, as a tracer must read it.
type Kind string

const (
	Bool          Kind = "bool"
	Int           Kind = "int"
	Uint          Kind = "uint"
	Float         Kind = "float"
	Complex       Kind = "complex"
	String        Kind = "string"
	Pointer       Kind = "ptr"
	UnsafePointer Kind = "uptr"
	Struct        Kind = "struct"
	Array         Kind = "array"
	Slice         Kind = "slice"
	Map           Kind = "map"
	Chan          Kind = "chan"
	Func          Kind = "func"
	Iface         Kind = "iface" // an interface with methods: itab, data
	Eface         Kind = "eface" // interface{}: type, data
)

// Type is the layout of one Go type.
type Type struct {
	Kind Kind `json:"k"`
	// Name is a named type's name, qualified by its package's path
	// ("time.Time", "example.com/shop.Order"): what a tracer knows a
	// time, a duration or an error by.
	Name string `json:"n,omitempty"`
	Size int64  `json:"s"`
	// Elem is what a pointer points to and what an array or a slice
	// holds, and for a map, a slot of its groups: a struct of a key
	// ("key") and an elem ("elem") as the runtime lays them out; nil past
	// the depth bound.
	Elem *Type `json:"e,omitempty"`
	// Len is an array's length.
	Len    int64   `json:"l,omitempty"`
	Fields []Field `json:"f,omitempty"`
	// Cut says the fields past MaxFields are left out.
	Cut bool `json:"c,omitempty"`
}

// Field is one field of a struct.
type Field struct {
	Name     string `json:"n"`
	Offset   int64  `json:"o"`
	Embedded bool   `json:"m,omitempty"`
	Type     *Type  `json:"t"`
}

// Bounds of a layout.
const (
	MaxDepth  = 4
	MaxFields = 32
	MaxTypes  = 128
)

// MapMaxSlotBytes is the largest key or elem a map's slot holds in
// place (abi.MapMaxKeyBytes, MapMaxElemBytes): a larger one is a pointer
// there, which a layout does not follow.
const MapMaxSlotBytes = 128

// Of returns the layout of t for an architecture of the given sizes. It
// reports false when t is, or holds within the bounds, an invalid type or
// a named type that ok rejects (nil accepts every one): then the layout
// would be wrong, not merely cut.
func Of(t types.Type, sizes types.Sizes, ok func(*types.Named) bool) (*Type, bool) {
	b := builder{sizes: sizes, ok: ok, valid: true}
	l := b.of(t, MaxDepth)
	return l, b.valid
}

type builder struct {
	sizes types.Sizes
	ok    func(*types.Named) bool
	valid bool
	types int
}

func (b *builder) of(t types.Type, depth int) *Type {
	t = types.Unalias(t)
	l := &Type{}
	if b.types++; b.types >= MaxTypes {
		depth = 0
	}
	if n, isNamed := t.(*types.Named); isNamed {
		if b.ok != nil && !b.ok(n) {
			b.valid = false
		}
		l.Name = types.TypeString(n, nil)
	}
	u := t.Underlying()
	switch unsized(t, map[types.Type]bool{}) {
	case invalid:
		b.valid = false
		l.Kind = UnsafePointer
		return l
	case generic:
		// Its size depends on the instantiation, which the generic code
		// does not know: the value shows as its address.
		l.Kind = UnsafePointer
		return l
	}
	l.Size = b.sizes.Sizeof(t)
	switch u := u.(type) {
	case *types.Basic:
		l.Kind = basicKind(u)
	case *types.Pointer:
		l.Kind = Pointer
		if depth > 0 {
			l.Elem = b.of(u.Elem(), depth-1)
		}
	case *types.Array:
		l.Kind, l.Len = Array, u.Len()
		if u.Len() < 0 {
			b.valid = false
		}
		if depth > 0 {
			l.Elem = b.of(u.Elem(), depth-1)
		}
	case *types.Slice:
		l.Kind = Slice
		if depth > 0 {
			l.Elem = b.of(u.Elem(), depth-1)
		}
	case *types.Struct:
		l.Kind = Struct
		if depth == 0 {
			break
		}
		fields := make([]*types.Var, u.NumFields())
		for i := range fields {
			fields[i] = u.Field(i)
		}
		offsets := b.sizes.Offsetsof(fields)
		for i, f := range fields {
			if i == MaxFields {
				l.Cut = true
				break
			}
			l.Fields = append(l.Fields, Field{Name: f.Name(), Offset: offsets[i], Embedded: f.Embedded(), Type: b.of(f.Type(), depth-1)})
		}
	case *types.Map:
		l.Kind = Map
		if depth > 0 {
			l.Elem = b.slot(u, depth-1)
		}
	case *types.Chan:
		l.Kind = Chan
	case *types.Signature:
		l.Kind = Func
	case *types.Interface:
		l.Kind = Iface
		if u.Empty() {
			l.Kind = Eface
		}
	}
	return l
}

// slot is the layout of a map's slot in a group of Go's swiss tables
// (internal/runtime/maps, Go 1.24 on): a struct of its key and its elem,
// as the compiler lays it out (reflectdata.MapGroupType), which says
// where a group's keys and elems are, whether the group holds slots or
// (GOEXPERIMENT=mapsplitgroup) its keys and then its elems. It is nil
// when the key or the elem is too large to be held in place.
func (b *builder) slot(m *types.Map, depth int) *Type {
	key, elem := types.NewField(0, nil, "key", m.Key(), false), types.NewField(0, nil, "elem", m.Elem(), false)
	if unsized(key.Type(), map[types.Type]bool{}) != sized || unsized(elem.Type(), map[types.Type]bool{}) != sized {
		return nil
	}
	if b.sizes.Sizeof(key.Type()) > MapMaxSlotBytes || b.sizes.Sizeof(elem.Type()) > MapMaxSlotBytes {
		return nil
	}
	st := types.NewStruct([]*types.Var{key, elem}, nil)
	b.types++
	offsets := b.sizes.Offsetsof([]*types.Var{key, elem})
	return &Type{Kind: Struct, Size: b.sizes.Sizeof(st), Fields: []Field{
		{Name: "key", Offset: offsets[0], Type: b.of(key.Type(), depth)},
		{Name: "elem", Offset: offsets[1], Type: b.of(elem.Type(), depth)},
	}}
}

// Size returns the size of a value of type t on an architecture of the
// given sizes, and false where it is not known: where it depends on a
// type parameter, or t holds an invalid type.
func Size(t types.Type, sizes types.Sizes) (int64, bool) {
	if unsized(t, map[types.Type]bool{}) != sized {
		return 0, false
	}
	return sizes.Sizeof(t), true
}

// sizedness is why a type's size is not known, if it is not.
type sizedness int

const (
	sized sizedness = iota
	generic
	invalid
)

// unsized says whether t's size depends on a type parameter or on an
// invalid type, which go/types' Sizes cannot measure.
func unsized(t types.Type, seen map[types.Type]bool) sizedness {
	if seen[t] {
		return sized
	}
	seen[t] = true
	switch t := types.Unalias(t).(type) {
	case *types.Basic:
		if t.Kind() == types.Invalid {
			return invalid
		}
	case *types.TypeParam:
		return generic
	case *types.Named:
		for i := range t.TypeArgs().Len() {
			if why := unsized(t.TypeArgs().At(i), seen); why != sized {
				return why
			}
		}
		return unsized(t.Underlying(), seen)
	case *types.Array:
		return unsized(t.Elem(), seen)
	case *types.Struct:
		for i := range t.NumFields() {
			if why := unsized(t.Field(i).Type(), seen); why != sized {
				return why
			}
		}
	}
	return sized
}

func basicKind(u *types.Basic) Kind {
	info := u.Info()
	switch {
	case info&types.IsBoolean != 0:
		return Bool
	case info&types.IsString != 0:
		return String
	case u.Kind() == types.UnsafePointer:
		return UnsafePointer
	case info&types.IsUnsigned != 0:
		return Uint
	case info&types.IsInteger != 0:
		return Int
	case info&types.IsFloat != 0:
		return Float
	case info&types.IsComplex != 0:
		return Complex
	}
	return UnsafePointer
}

// Needed reports whether a value of type t, as a probe passes it, has a
// layout to record: a struct, an array, a slice or an interface (passed
// as its address), a pointer or a map (passed as themselves). Scalars and
// strings have none.
func Needed(t types.Type) bool {
	switch t.Underlying().(type) {
	case *types.Struct, *types.Array, *types.Slice, *types.Interface, *types.Pointer, *types.Map:
		return true
	}
	return false
}

// Encode is the layout as the probe table stores it.
func (t *Type) Encode() string {
	b, err := json.Marshal(t)
	if err != nil {
		panic(err) // a Type always marshals
	}
	return string(b)
}

// Decode reads what Encode wrote.
func Decode(s string) (*Type, error) {
	var t Type
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	return &t, nil
}
