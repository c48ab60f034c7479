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
// itab for one with methods). It reads Go's own type data, which every
// binary keeps, stripped or not: the runtime's moduledata, found by its
// first word, the address of .gopclntab; its types field, where the names
// are; and each descriptor's name offset.
//
// Only executables that are not position independent are read: a PIE's
// addresses at run time differ from the file's by where it was loaded.
type TypeNames struct {
	f     *elf.File
	types uint64 // moduledata.types
	cache map[uint64]Dynamic
}

// Dynamic is what an interface's type descriptor says of its value's type.
type Dynamic struct {
	Name string
	// Kind is the kind of a boolean, numeric or string type, whose value
	// the decoder reads; empty for the others.
	Kind layout.Kind
	Size int64
}

// Offsets in moduledata (runtime/symtab.go) and abi.Type
// (internal/abi/type.go), on 64-bit architectures.
const (
	mdText    = 176
	mdTypes   = 296
	mdETypes  = 304
	typeSize  = 0
	typeTFlag = 20
	typeKind  = 23
	typeStr   = 40
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
	if f.Type != elf.ET_EXEC {
		return nil, errors.New("a position-independent executable: its type addresses are known only at run time")
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

// basicKinds are the abi.Kind values of the types whose values the
// decoder reads, as layout kinds.
var basicKinds = map[byte]layout.Kind{
	1: layout.Bool, 2: layout.Int, 3: layout.Int, 4: layout.Int, 5: layout.Int, 6: layout.Int,
	7: layout.Uint, 8: layout.Uint, 9: layout.Uint, 10: layout.Uint, 11: layout.Uint, 12: layout.Uint,
	13: layout.Float, 14: layout.Float, 24: layout.String,
}

// Type describes the type whose descriptor is at addr, named as Go's
// reflect.Type.String names it ("*errors.errorString", "main.Order",
// "int").
func (n *TypeNames) Type(addr uint64) (Dynamic, error) {
	if d, ok := n.cache[addr]; ok {
		return d, nil
	}
	head := make([]byte, typeStr+4)
	if err := n.read(addr, head); err != nil {
		return Dynamic{}, err
	}
	off := binary.LittleEndian.Uint32(head[typeStr:])
	at := n.types + uint64(off)
	// A name is a flags byte, a uvarint length and the bytes.
	var lenBuf [11]byte
	if err := n.read(at, lenBuf[:]); err != nil {
		return Dynamic{}, err
	}
	size, k := binary.Uvarint(lenBuf[1:])
	if k <= 0 || size > 1<<12 {
		return Dynamic{}, fmt.Errorf("no type name at %#x", at)
	}
	b := make([]byte, size)
	if err := n.read(at+1+uint64(k), b); err != nil {
		return Dynamic{}, err
	}
	d := Dynamic{Name: string(b), Kind: basicKinds[head[typeKind]&kindMask], Size: int64(binary.LittleEndian.Uint64(head[typeSize:]))}
	if head[typeTFlag]&tflagExtraStar != 0 && len(d.Name) > 0 {
		d.Name = d.Name[1:]
	}
	n.cache[addr] = d
	return d, nil
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
