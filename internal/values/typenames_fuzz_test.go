package values

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"
	"unicode/utf8"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/testing/elftest"
)

// fuzzTypesAt is where a fuzzed image's type data begins (moduledata's
// types) and is loaded.
const fuzzTypesAt = 0x10000

// typeImage lays out runtime type descriptors (abi.Type and the types
// built on it, abi.Name) as Go's linker does, at fuzzTypesAt: the seeds of
// FuzzTypeNames, in the format TestTypeNames reads from real binaries.
type typeImage struct{ b []byte }

func (m *typeImage) at() uint64 { return fuzzTypesAt + uint64(len(m.b)) }

func (m *typeImage) align() {
	for len(m.b)%8 != 0 {
		m.b = append(m.b, 0)
	}
}

// name appends an abi.Name and returns its offset from the types.
func (m *typeImage) name(s string, flags byte) uint64 {
	off := uint64(len(m.b))
	m.b = binary.AppendUvarint(append(m.b, flags), uint64(len(s)))
	m.b = append(m.b, s...)
	m.align()
	return off
}

// desc appends a descriptor of kind and size, and words after its
// header, and returns its address.
func (m *typeImage) desc(name string, kind byte, size, ptrs uint64, words ...uint64) uint64 {
	nameOff := m.name(name, 0)
	addr := m.at()
	h := make([]byte, typeHeader)
	binary.LittleEndian.PutUint64(h[typeSize:], size)
	binary.LittleEndian.PutUint64(h[typePtrs:], ptrs)
	h[typeKind] = kind
	binary.LittleEndian.PutUint32(h[typeStr:], uint32(nameOff))
	m.b = append(m.b, h...)
	for _, w := range words {
		m.b = binary.LittleEndian.AppendUint64(m.b, w)
	}
	return addr
}

// fieldDesc is an abi.StructField.
type fieldDesc struct {
	name     string
	embedded bool
	typ, off uint64
}

// structDesc appends a struct's fields and its descriptor.
func (m *typeImage) structDesc(name string, size, ptrs uint64, fields ...fieldDesc) uint64 {
	var names []uint64
	for _, f := range fields {
		var flags byte
		if f.embedded {
			flags = nameEmbedded
		}
		names = append(names, fuzzTypesAt+m.name(f.name, flags))
	}
	at := m.at()
	for i, f := range fields {
		m.b = binary.LittleEndian.AppendUint64(m.b, names[i])
		m.b = binary.LittleEndian.AppendUint64(m.b, f.typ)
		m.b = binary.LittleEndian.AppendUint64(m.b, f.off)
	}
	return m.desc(name, kindStruct, size, ptrs, 0, at, uint64(len(fields)), uint64(len(fields)))
}

// setFieldType makes field i of the struct at addr of the type at typ.
func (m *typeImage) setFieldType(addr uint64, i int, typ uint64) {
	fields := binary.LittleEndian.Uint64(m.b[addr-fuzzTypesAt+structFields:])
	binary.LittleEndian.PutUint64(m.b[fields-fuzzTypesAt+uint64(i)*fieldSize+fieldType:], typ)
}

// FuzzTypeNames reads the type descriptors of a binary nobody vouches
// for, as trace does for each interface an event holds: whatever the
// bytes, Type returns a name and a layout or an error, never panics, and
// the layout stays within the bounds of every layout the tracer decodes
// (layout.MaxDepth levels, MaxFields fields, MaxTypes types), which the
// trace package's FuzzRecord decodes values by. Its name shows as valid
// UTF-8 once escaped.
//
// The seeds lay out, as Go's linker does, a struct with an embedded
// struct, a string, an array, a pointer to itself and a []byte; an
// empty interface; and a struct that holds an array of itself.
func FuzzTypeNames(f *testing.F) {
	var m typeImage
	m.name("", 0) // no name at offset 0
	intT := m.desc("int", 2, 8, 0)
	u8 := m.desc("uint8", 8, 1, 0)
	u16 := m.desc("uint16", 9, 2, 0)
	str := m.desc("string", 24, 16, 8)
	arr := m.desc("[3]uint16", kindArray, 6, 0, u16, 0, 3)
	bytesT := m.desc("[]uint8", kindSlice, 24, 8, u8)
	base := m.structDesc("main.Base", 1, 0, fieldDesc{"Kind", false, u8, 0})
	order := m.structDesc("main.Order", 80, 48,
		fieldDesc{"ID", false, intT, 0}, fieldDesc{"Base", true, base, 8}, fieldDesc{"Name", false, str, 16},
		fieldDesc{"Tags", false, arr, 32}, fieldDesc{"Next", false, 0, 40}, fieldDesc{"Raw", false, bytesT, 48})
	ptr := m.desc("*main.Order", kindPointer, 8, 8, order)
	m.setFieldType(order, 4, ptr)
	eface := m.desc("interface {}", kindInterface, 16, 16, 0, 0, 0)
	tree := m.structDesc("main.Tree", 16, 8, fieldDesc{"Kids", false, 0, 0})
	m.setFieldType(tree, 0, m.desc("[1]main.Tree", kindArray, 16, 8, tree, 0, 1))
	for _, at := range []uint64{order, ptr, bytesT, eface, tree, arr} {
		f.Add(m.b, uint32(at-fuzzTypesAt))
	}

	f.Fuzz(func(t *testing.T, img []byte, at uint32) {
		ef, err := elf.NewFile(bytes.NewReader(elftest.Load(img, fuzzTypesAt, uint64(len(img)), elf.PF_R)))
		if err != nil {
			t.Fatal(err)
		}
		n := &TypeNames{f: ef, types: fuzzTypesAt, cache: map[uint64]Dynamic{}}
		d, err := n.Type(fuzzTypesAt + uint64(at))
		if err != nil {
			return
		}
		if !utf8.ValidString(Escape(d.Name)) {
			t.Errorf("the name %q escapes to %q", d.Name, Escape(d.Name))
		}
		types := 0
		var walk func(l *layout.Type, depth int)
		walk = func(l *layout.Type, depth int) {
			if l == nil {
				return
			}
			if types++; types > layout.MaxTypes || depth > layout.MaxDepth+1 || len(l.Fields) > layout.MaxFields {
				t.Fatalf("a layout past the bounds: %d types, %d levels, %d fields:\n%s", types, depth, len(l.Fields), d.Layout.Encode())
			}
			for _, fl := range l.Fields {
				walk(fl.Type, depth+1)
			}
			walk(l.Elem, depth+1)
		}
		walk(d.Layout, 0)
	})
}
