package values

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-usdt/usdt/internal/layout"
)

// TypeNames names a binary's Go types by the addresses of their runtime
// type descriptors (abi.Type), which is what an interface holds (in its
// itab for one with methods), and gives their layouts. It reads Go's own
// type data, which every binary keeps, stripped or not: the runtime's
// moduledata, found by its first word, the address of .gopclntab; its
// types field, where the names are; each descriptor's name offset, size
// and kind; and a struct's fields, an array's or a slice's element type.
//
// Addresses are the file's. A position-independent executable's differ at
// run time by where it was loaded (see Loaded): the file holds its
// descriptors' pointers to each other as linked, and its relocations only
// add that bias.
type TypeNames struct {
	f     *elf.File
	types uint64 // moduledata.types
	cache map[uint64]Dynamic
}

// Dynamic is what an interface's type descriptor says of its value's type.
type Dynamic struct {
	Name string
	// Layout is the layout of a value the interface's data points to, as
	// the type descriptors give it (see layoutOf); nil for a type whose
	// value the data word is: a pointer, a map, a channel, a func, a
	// struct or an array of one pointer.
	Layout *layout.Type
}

// Offsets in moduledata (runtime/symtab.go) and abi.Type
// (internal/abi/type.go), on 64-bit architectures.
const (
	mdText     = 176
	mdTypes    = 296
	mdETypes   = 304
	typeSize   = 0
	typePtrs   = 8 // PtrBytes
	typeTFlag  = 20
	typeKind   = 23
	typeStr    = 40
	typeHeader = 48 // the abi.Type that starts every descriptor
	// After it: ArrayType's Elem and Len, SliceType's Elem, StructType's
	// Fields and InterfaceType's Methods (slices: pointer, length).
	arrayElem    = 48
	arrayLen     = 64
	sliceElem    = 48
	structFields = 56
	ifaceMethods = 56
	// abi.StructField: Name, Typ, Offset.
	fieldSize   = 24
	fieldType   = 8
	fieldOffset = 16
	// nameEmbedded is abi.Name's flag of an embedded field.
	nameEmbedded = 1 << 3
	// tflagExtraStar says the name has a '*' too many (abi.TFlagExtraStar).
	tflagExtraStar = 1 << 1
	// kindMask keeps the kind of abi.Type.Kind_, which held flags too
	// before Go 1.26.
	kindMask = 1<<5 - 1
)

// NewTypeNames finds the type data of the executable f.
func NewTypeNames(f *elf.File) (*TypeNames, error) {
	pcln := f.Section(".gopclntab")
	text := f.Section(".text")
	if pcln == nil || text == nil {
		return nil, errors.New("no .gopclntab or .text: not a Go executable")
	}
	// The moduledata is writable data: .noptrdata before Go 1.26,
	// .go.module since.
	for _, s := range f.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_ALLOC == 0 || s.Flags&elf.SHF_WRITE == 0 {
			continue
		}
		b, err := s.Data()
		if err != nil {
			return nil, err
		}
		for off := 0; off+mdETypes+16 <= len(b); off += 8 {
			if binary.LittleEndian.Uint64(b[off:]) != pcln.Addr {
				continue
			}
			md := b[off:]
			if binary.LittleEndian.Uint64(md[mdText:]) != text.Addr {
				continue
			}
			// etypes follows types in Go 1.26; Go 1.27 puts typedesclen,
			// a length, between them.
			types := binary.LittleEndian.Uint64(md[mdTypes:])
			etypes126, etypes127 := binary.LittleEndian.Uint64(md[mdETypes:]), binary.LittleEndian.Uint64(md[mdETypes+8:])
			if types == 0 || etypes126 < types && etypes127 < types {
				continue
			}
			return &TypeNames{f: f, types: types, cache: map[uint64]Dynamic{}}, nil
		}
	}
	return nil, errors.New("no runtime moduledata found")
}

// abi.Kind values.
const (
	kindArray     = 17
	kindInterface = 20
	kindPointer   = 22
	kindSlice     = 23
	kindStruct    = 25
)

// kinds are the layout kinds of the abi.Kind values.
var kinds = map[byte]layout.Kind{
	1: layout.Bool, 2: layout.Int, 3: layout.Int, 4: layout.Int, 5: layout.Int, 6: layout.Int,
	7: layout.Uint, 8: layout.Uint, 9: layout.Uint, 10: layout.Uint, 11: layout.Uint, 12: layout.Uint,
	13: layout.Float, 14: layout.Float, 15: layout.Complex, 16: layout.Complex,
	kindArray: layout.Array, 18: layout.Chan, 19: layout.Func, kindInterface: layout.Iface, 21: layout.Map,
	kindPointer: layout.Pointer, kindSlice: layout.Slice, 24: layout.String, kindStruct: layout.Struct, 26: layout.UnsafePointer,
}

// Type describes the type whose descriptor is at addr, named as Go's
// reflect.Type.String names it ("*errors.errorString", "main.Order",
// "int").
func (n *TypeNames) Type(addr uint64) (Dynamic, error) {
	if d, ok := n.cache[addr]; ok {
		return d, nil
	}
	head, name, err := n.descriptor(addr)
	if err != nil {
		return Dynamic{}, err
	}
	d := Dynamic{Name: name}
	// A value of pointer shape is the data word itself, which the
	// decoder shows as an address (abi.TFlagDirectIface caches this test).
	direct := binary.LittleEndian.Uint64(head[typeSize:]) == 8 && binary.LittleEndian.Uint64(head[typePtrs:]) == 8
	if !direct {
		budget := layout.MaxTypes
		if d.Layout, err = n.layoutOf(addr, layout.MaxDepth, &budget); err != nil {
			return Dynamic{}, err
		}
	}
	n.cache[addr] = d
	return d, nil
}

// descriptor reads the abi.Type at addr and its name.
func (n *TypeNames) descriptor(addr uint64) (head []byte, name string, err error) {
	head = make([]byte, typeHeader)
	if err := n.read(addr, head); err != nil {
		return nil, "", err
	}
	off := binary.LittleEndian.Uint32(head[typeStr:])
	name, _, err = n.name(n.types + uint64(off))
	if err != nil {
		return nil, "", err
	}
	if head[typeTFlag]&tflagExtraStar != 0 && len(name) > 0 {
		name = name[1:]
	}
	return head, name, nil
}

// name reads the abi.Name at addr: a flags byte, a uvarint length and
// the bytes.
func (n *TypeNames) name(at uint64) (string, byte, error) {
	var lenBuf [11]byte
	if err := n.read(at, lenBuf[:]); err != nil {
		return "", 0, err
	}
	size, k := binary.Uvarint(lenBuf[1:])
	if k <= 0 || size > 1<<12 {
		return "", 0, fmt.Errorf("no type name at %#x", at)
	}
	b := make([]byte, size)
	if err := n.read(at+1+uint64(k), b); err != nil {
		return "", 0, err
	}
	return string(b), lenBuf[0], nil
}

// layoutOf is the layout of the type whose descriptor is at addr, within
// layout's bounds: depth levels of fields and elements, and budget
// descriptors in all. What an interface's data holds is read when the
// probe fires, before its type is known, without following anything in
// it but the guesses of NewPlan: so a pointer, and a slice's elements but
// a []byte's, are left without the layout that would follow them, and
// show as what was not read.
func (n *TypeNames) layoutOf(addr uint64, depth int, budget *int) (*layout.Type, error) {
	head, name, err := n.descriptor(addr)
	if err != nil {
		return nil, err
	}
	k, ok := kinds[head[typeKind]&kindMask]
	if !ok {
		return nil, fmt.Errorf("descriptor at %#x: kind %d", addr, head[typeKind]&kindMask)
	}
	t := &layout.Type{Kind: k, Name: name, Size: int64(binary.LittleEndian.Uint64(head[typeSize:]))}
	if *budget--; *budget <= 0 {
		depth = 0
	}
	word := func(off uint64) (uint64, error) {
		var b [8]byte
		err := n.read(addr+off, b[:])
		return binary.LittleEndian.Uint64(b[:]), err
	}
	switch head[typeKind] & kindMask {
	case kindInterface:
		methods, err := word(ifaceMethods + 8)
		if err != nil {
			return nil, err
		}
		if methods == 0 {
			t.Kind = layout.Eface
		}
	case kindArray:
		if t.Len, err = n.elem(t, word, arrayElem, arrayLen, depth, budget); err != nil {
			return nil, err
		}
	case kindSlice:
		if _, err := n.elem(t, word, sliceElem, 0, depth, budget); err != nil {
			return nil, err
		}
		if t.Elem != nil && (t.Elem.Kind != layout.Uint || t.Elem.Size != 1) {
			t.Elem = nil
		}
	case kindStruct:
		if depth == 0 {
			break
		}
		fields, err := word(structFields)
		if err != nil {
			return nil, err
		}
		count, err := word(structFields + 8)
		if err != nil {
			return nil, err
		}
		for i := range min(count, layout.MaxFields+1) {
			if i == layout.MaxFields {
				t.Cut = true
				break
			}
			var f [fieldSize]byte
			if err := n.read(fields+i*fieldSize, f[:]); err != nil {
				return nil, err
			}
			fieldName, flags, err := n.name(binary.LittleEndian.Uint64(f[:]))
			if err != nil {
				return nil, err
			}
			ft, err := n.layoutOf(binary.LittleEndian.Uint64(f[fieldType:]), depth-1, budget)
			if err != nil {
				return nil, err
			}
			t.Fields = append(t.Fields, layout.Field{Name: fieldName, Offset: int64(binary.LittleEndian.Uint64(f[fieldOffset:])),
				Embedded: flags&nameEmbedded != 0, Type: ft})
		}
	}
	return t, nil
}

// elem gives t, an array or a slice, its element type's layout from the
// descriptor's word at elemAt, and returns an array's length, the word at
// lenAt.
func (n *TypeNames) elem(t *layout.Type, word func(uint64) (uint64, error), elemAt, lenAt uint64, depth int, budget *int) (int64, error) {
	var length uint64
	if lenAt != 0 {
		var err error
		if length, err = word(lenAt); err != nil {
			return 0, err
		}
	}
	if depth == 0 {
		return int64(length), nil
	}
	elem, err := word(elemAt)
	if err != nil {
		return 0, err
	}
	t.Elem, err = n.layoutOf(elem, depth-1, budget)
	return int64(length), err
}

// Loaded is what names the descriptors of a process that loaded the
// executable bias bytes above the addresses the file links it at: a
// position-independent executable's (0 for another).
func (n *TypeNames) Loaded(bias uint64) Namer {
	if bias == 0 {
		return n.Type
	}
	return func(addr uint64) (Dynamic, error) { return n.Type(addr - bias) }
}

// read copies the file's bytes at the virtual address addr.
func (n *TypeNames) read(addr uint64, b []byte) error {
	for _, p := range n.f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr+uint64(len(b)) <= p.Vaddr+p.Filesz {
			_, err := p.ReadAt(b, int64(addr-p.Vaddr))
			return err
		}
	}
	return fmt.Errorf("address %#x is in no loaded segment", addr)
}
