// Package probetable defines the record that carries Plan9-stub probes from
// the compiler to the link step.
//
// Go's internal linker drops every non-allocated section, so a package
// compiled without the C toolchain cannot bring its own .note.stapsdt. It
// brings a table instead: one data symbol, assembled from DATA directives,
// that the Go code also uses as its semaphore array. The linker resolves the
// stub addresses inside it like any other data relocation, so the finished
// executable describes its own probe sites, even when stripped (-s -w) or
// position independent. The link step scans the writable data for tables and
// turns each into notes.
//
// Layout, little-endian, 8-byte aligned:
//
//	0   magic [8]byte
//	8   count uint32, size uint32 (whole table), checksum uint32 (FNV-1a of the strings), pad uint32
//	24  semaphores [count]uint16, padded to 8 bytes (zero in the file, counted by the kernel)
//	..  stub addresses [count]uint64 (relocated by the linker)
//	..  strings: "package\0", then per probe "provider\0name\0args\0", padded to 8 bytes
//
// The package is the import path of the package whose functions
// usdt-toolexec instrumented, and empty for usdtgen's tables.
package probetable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
)

// Magic starts every table. It is not valid UTF-8 and not a plausible
// pointer, so data that merely happens to hold it is rare, and the checksum
// rejects the rest.
var Magic = [8]byte{0x7f, 'U', 'S', 'D', 'T', 'g', 'o', 0x01}

const headerSize = 24

// Entry is one probe in a table. Args is the stapsdt argument spec for the
// architecture the table is assembled for.
type Entry struct {
	Provider, Name, Args string
}

// Layout gives the offsets of a table's parts, which the Go declaration of
// the table's symbol must reproduce exactly.
type Layout struct {
	Count          int
	SemaphoreSlots int // count rounded up to a multiple of 4
	StubsOffset    int
	StringsOffset  int
	Size           int
}

// SemaphoreOffset is the offset of probe i's semaphore from the table start.
func (l Layout) SemaphoreOffset(i int) int { return headerSize + 2*i }

// TailWords is how many uint64 follow the semaphores (stubs and strings).
func (l Layout) TailWords() int { return (l.Size - l.StubsOffset) / 8 }

func layout(pkg string, entries []Entry) (Layout, []byte) {
	var s strings.Builder
	s.WriteString(pkg + "\x00")
	for _, e := range entries {
		s.WriteString(e.Provider + "\x00" + e.Name + "\x00" + e.Args + "\x00")
	}
	blob := []byte(s.String())
	for len(blob)%8 != 0 {
		blob = append(blob, 0)
	}
	n := len(entries)
	slots := (n + 3) &^ 3
	l := Layout{Count: n, SemaphoreSlots: slots}
	l.StubsOffset = headerSize + 2*slots
	l.StringsOffset = l.StubsOffset + 8*n
	l.Size = l.StringsOffset + len(blob)
	return l, blob
}

func checksum(b []byte) uint32 {
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}

// Image is a table as the assembler must lay it out: its bytes, with zeros
// where the linker writes stub addresses.
type Image struct {
	Layout Layout
	Bytes  []byte
}

// Build lays out a table for entries of package pkg.
func Build(pkg string, entries []Entry) (Image, error) {
	for _, e := range entries {
		for _, s := range []string{pkg, e.Provider, e.Name, e.Args} {
			if strings.IndexByte(s, 0) >= 0 {
				return Image{}, fmt.Errorf("probetable: NUL byte in %q", s)
			}
		}
	}
	l, blob := layout(pkg, entries)
	b := make([]byte, l.Size)
	copy(b, Magic[:])
	binary.LittleEndian.PutUint32(b[8:], uint32(l.Count))
	binary.LittleEndian.PutUint32(b[12:], uint32(l.Size))
	binary.LittleEndian.PutUint32(b[16:], checksum(blob))
	copy(b[l.StringsOffset:], blob)
	return Image{Layout: l, Bytes: b}, nil
}

// Site is a probe found in a linked table.
type Site struct {
	Entry
	Package   string // import path of an instrumented package, or empty
	Stub      uint64 // address of the stub's NOP
	Semaphore uint64 // address of the semaphore
}

// ErrNotTable reports bytes that start with the magic but are no table.
var ErrNotTable = errors.New("probetable: not a table")

// Decode reads the table at the start of b, which was loaded at address
// addr. It returns the table's size so a scanner can skip past it.
func Decode(b []byte, addr uint64) ([]Site, int, error) {
	if len(b) < headerSize || [8]byte(b[:8]) != Magic {
		return nil, 0, ErrNotTable
	}
	n := int(binary.LittleEndian.Uint32(b[8:]))
	size := int(binary.LittleEndian.Uint32(b[12:]))
	if n > 1<<16 || size > len(b) || size < headerSize {
		return nil, 0, ErrNotTable
	}
	l := Layout{Count: n, SemaphoreSlots: (n + 3) &^ 3}
	l.StubsOffset = headerSize + 2*l.SemaphoreSlots
	l.StringsOffset = l.StubsOffset + 8*n
	if l.StringsOffset > size {
		return nil, 0, ErrNotTable
	}
	blob := b[l.StringsOffset:size]
	if checksum(blob) != binary.LittleEndian.Uint32(b[16:]) {
		return nil, 0, ErrNotTable
	}
	fields := make([]string, 0, 1+3*n)
	for rest := blob; len(fields) < 1+3*n; {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil, 0, ErrNotTable
		}
		fields = append(fields, string(rest[:i]))
		rest = rest[i+1:]
	}
	pkg, fields := fields[0], fields[1:]
	sites := make([]Site, n)
	for i := range sites {
		sites[i] = Site{
			Package:   pkg,
			Entry:     Entry{Provider: fields[3*i], Name: fields[3*i+1], Args: fields[3*i+2]},
			Stub:      binary.LittleEndian.Uint64(b[l.StubsOffset+8*i:]),
			Semaphore: addr + uint64(l.SemaphoreOffset(i)),
		}
		if sites[i].Stub == 0 {
			return nil, 0, fmt.Errorf("probetable: probe %s:%s has no stub address", sites[i].Provider, sites[i].Name)
		}
	}
	return sites, size, nil
}
