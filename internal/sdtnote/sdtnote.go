// Package sdtnote reads and writes the SystemTap SDT note format
// (".note.stapsdt"), the on-disk description of a USDT probe that bpftrace,
// bcc, perf and gdb all read. It knows nothing about where the notes go in a
// file: internal/elfpatch decides that.
package sdtnote

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// SectionName is the section every consumer looks the notes up by.
const SectionName = ".note.stapsdt"

// NoteType is the n_type of a stapsdt note (NT_STAPSDT).
const NoteType = 3

// noteName is the owner name with its NUL: namesz is 8, already a multiple
// of 4, so the descriptor starts right after it.
const noteName = "stapsdt\x00"

// Note is one probe site as stapsdt describes it.
type Note struct {
	Provider, Name, Args string
	// PC is the link-time address of the probe instruction, Base the
	// link-time address of the .stapsdt.base section (consumers compare it
	// with the section's real address to undo prelinking), Semaphore the
	// link-time address of the 16-bit enable counter or 0.
	PC, Base, Semaphore uint64
}

func align4(n int) int { return (n + 3) &^ 3 }

// Encode returns the contents of a .note.stapsdt section for a 64-bit file
// with the given byte order. Strings must not contain NUL bytes: a consumer
// would read a truncated name and misparse the rest of the descriptor.
func Encode(notes []Note, order binary.AppendByteOrder) []byte {
	size := 0
	for _, n := range notes {
		size += 12 + len(noteName) + align4(24+len(n.Provider)+len(n.Name)+len(n.Args)+3)
	}
	out := make([]byte, 0, size)
	for _, n := range notes {
		descsz := 24 + len(n.Provider) + len(n.Name) + len(n.Args) + 3
		out = order.AppendUint32(out, uint32(len(noteName)))
		// descsz is the unpadded length: readers skip to the next note by
		// rounding it up themselves.
		out = order.AppendUint32(out, uint32(descsz))
		out = order.AppendUint32(out, NoteType)
		out = append(out, noteName...)
		out = order.AppendUint64(out, n.PC)
		out = order.AppendUint64(out, n.Base)
		out = order.AppendUint64(out, n.Semaphore)
		for _, s := range []string{n.Provider, n.Name, n.Args} {
			out = append(append(out, s...), 0)
		}
		out = append(out, make([]byte, align4(descsz)-descsz)...)
	}
	return out
}

// Read returns every stapsdt note in all SHT_NOTE sections named
// .note.stapsdt of f, in file order. Other notes in those sections are
// skipped, as consumers do; a note whose header or descriptor runs past its
// section is an error. A section turned into SHT_NULL (how elfpatch retires
// an old note section) is not read.
func Read(f *elf.File) ([]Note, error) {
	addrSize := 8
	if f.Class == elf.ELFCLASS32 {
		addrSize = 4
	}
	var notes []Note
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE || s.Name != SectionName {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("sdtnote: reading %s: %w", SectionName, err)
		}
		got, err := parse(data, f.ByteOrder, addrSize)
		if err != nil {
			return nil, fmt.Errorf("sdtnote: section %s at offset %#x: %w (the binary's probe notes are damaged: readelf -n shows what they hold)", SectionName, s.Offset, err)
		}
		notes = append(notes, got...)
	}
	return notes, nil
}

func parse(data []byte, order binary.ByteOrder, addrSize int) ([]Note, error) {
	var notes []Note
	for off := 0; off < len(data); {
		if len(data)-off < 12 {
			// Trailing alignment padding is legitimate; anything else is not.
			if allZero(data[off:]) {
				break
			}
			return nil, fmt.Errorf("truncated note header at %#x", off)
		}
		namesz := int(order.Uint32(data[off:]))
		descsz := int(order.Uint32(data[off+4:]))
		typ := order.Uint32(data[off+8:])
		nameOff := off + 12
		descOff := nameOff + align4(namesz)
		end := descOff + align4(descsz)
		if descOff > len(data) || descOff+descsz > len(data) {
			return nil, fmt.Errorf("note at %#x runs past the section", off)
		}
		if end > len(data) {
			end = len(data) // the last note's padding may be cut off
		}
		name := data[nameOff : nameOff+namesz]
		desc := data[descOff : descOff+descsz]
		off = end
		if typ != NoteType || string(name) != noteName {
			continue
		}
		n, err := parseDesc(desc, order, addrSize)
		if err != nil {
			return nil, fmt.Errorf("note at %#x: %w", nameOff-12, err)
		}
		notes = append(notes, n)
	}
	return notes, nil
}

func parseDesc(desc []byte, order binary.ByteOrder, addrSize int) (Note, error) {
	var n Note
	if len(desc) < 3*addrSize {
		return n, errors.New("descriptor too short for its addresses")
	}
	addr := func(i int) uint64 {
		if addrSize == 4 {
			return uint64(order.Uint32(desc[i*4:]))
		}
		return order.Uint64(desc[i*8:])
	}
	n.PC, n.Base, n.Semaphore = addr(0), addr(1), addr(2)
	rest := desc[3*addrSize:]
	var strs [3]string
	for i := range strs {
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return n, errors.New("descriptor strings are not NUL-terminated")
		}
		strs[i] = string(rest[:j])
		rest = rest[j+1:]
	}
	n.Provider, n.Name, n.Args = strs[0], strs[1], strs[2]
	return n, nil
}

// SplitArgs returns the operands of a note's argument string, one per
// argument ("-8@x0", "4@[sp, 16]"). Arguments are separated by spaces, but
// arm64 memory operands hold one inside their brackets, as GCC writes them.
func SplitArgs(args string) []string {
	var out []string
	depth, start := 0, -1
	for i, c := range args + " " {
		switch {
		case c == '[':
			depth++
		case c == ']':
			depth--
		case c == ' ' && depth == 0:
			if start >= 0 {
				out = append(out, args[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 { // an unclosed bracket: the operand's parser reports it
		out = append(out, args[start:])
	}
	return out
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
