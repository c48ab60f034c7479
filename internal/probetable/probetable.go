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
//	8   count uint32, size uint32 (whole table), checksum uint32, slots uint32
//	24  semaphores [slots]uint16, slots rounded up to a multiple of 4 (zero in the file, counted by the kernel)
//	..  stub addresses [count]uint64 (relocated by the linker)
//	..  slot of each probe [count]uint16, padded to 8 bytes
//	..  strings: "package\0", then per probe "provider\0name\0args\0", then
//	    "kinds\0" and per probe "kind,kind...\0", padded to 8 bytes
//
// The checksum is FNV-1a over the slot array and the strings, padding
// included: everything from the slot array to the end of the table.
//
// Several probes may share a semaphore slot: the entry and exit probes of
// one instrumented function do. The kernel counts the attachments of every
// uprobe that names a semaphore on that semaphore, as it does for the sites
// of one C probe that sys/sdt.h gives a single semaphore, so a shared slot
// is non-zero while any of its probes is traced.
//
// Kinds are the probe.Kind names of a probe's arguments, comma-separated: a
// tracer needs them to tell a string's pointer from an integer, which the
// argument spec does not. Tables written before kinds existed end after the
// args; their decoders ignore the kinds, and for them Kinds is nil.
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

	"github.com/go-usdt/usdt/internal/probe"
)

// Magic starts every table. It is not valid UTF-8 and not a plausible
// pointer, so data that merely happens to hold it is rare, and the checksum
// rejects the rest.
var Magic = [8]byte{0x7f, 'U', 'S', 'D', 'T', 'g', 'o', 0x02}

const headerSize = 24

// maxCount bounds a table's probes and semaphore slots: a slot index is a
// uint16.
const maxCount = 1 << 16

// Entry is one probe in a table. Args is the stapsdt argument spec for the
// architecture the table is assembled for. Semaphore is the index of the
// probe's semaphore slot; probes with the same index share a semaphore.
// Kinds are the arguments' kinds, one per spec of Args.
type Entry struct {
	Provider, Name, Args string
	Semaphore            int
	Kinds                []probe.Kind
}

// Layout gives the offsets of a table's parts, which the Go declaration of
// the table's symbol must reproduce exactly.
type Layout struct {
	Count          int
	SemaphoreSlots int // slots rounded up to a multiple of 4
	StubsOffset    int
	SlotsOffset    int // the slot index of each probe
	StringsOffset  int
	Size           int
}

// SemaphoreOffset is the offset of semaphore slot i from the table start.
func (l Layout) SemaphoreOffset(i int) int { return headerSize + 2*i }

// TailWords is how many uint64 follow the semaphores (stubs, slot indexes
// and strings).
func (l Layout) TailWords() int { return (l.Size - l.StubsOffset) / 8 }

func pad8(n int) int { return (n + 7) &^ 7 }

// newLayout lays out a table of count probes sharing slots semaphores, with
// a strings blob of blobSize bytes (already padded).
func newLayout(count, slots, blobSize int) Layout {
	l := Layout{Count: count, SemaphoreSlots: (slots + 3) &^ 3}
	l.StubsOffset = headerSize + 2*l.SemaphoreSlots
	l.SlotsOffset = l.StubsOffset + 8*count
	l.StringsOffset = l.SlotsOffset + pad8(2*count)
	l.Size = l.StringsOffset + blobSize
	return l
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

// Build lays out a table for entries of package pkg. The table has as many
// semaphore slots as the highest slot index of entries plus one.
func Build(pkg string, entries []Entry) (Image, error) {
	if len(entries) > maxCount {
		return Image{}, fmt.Errorf("probetable: %d probes, at most %d fit in a table", len(entries), maxCount)
	}
	var s strings.Builder
	s.WriteString(pkg + "\x00")
	slots := 0
	for _, e := range entries {
		for _, f := range []string{pkg, e.Provider, e.Name, e.Args} {
			if strings.IndexByte(f, 0) >= 0 {
				return Image{}, fmt.Errorf("probetable: NUL byte in %q", f)
			}
		}
		if e.Semaphore < 0 || e.Semaphore >= maxCount {
			return Image{}, fmt.Errorf("probetable: probe %s:%s has semaphore slot %d, outside [0, %d)", e.Provider, e.Name, e.Semaphore, maxCount)
		}
		slots = max(slots, e.Semaphore+1)
		s.WriteString(e.Provider + "\x00" + e.Name + "\x00" + e.Args + "\x00")
	}
	s.WriteString(kindsMarker + "\x00")
	for _, e := range entries {
		names := make([]string, len(e.Kinds))
		for i, k := range e.Kinds {
			names[i] = k.String()
		}
		s.WriteString(strings.Join(names, ",") + "\x00")
	}
	l := newLayout(len(entries), slots, pad8(s.Len()))
	b := make([]byte, l.Size)
	copy(b, Magic[:])
	binary.LittleEndian.PutUint32(b[8:], uint32(l.Count))
	binary.LittleEndian.PutUint32(b[12:], uint32(l.Size))
	binary.LittleEndian.PutUint32(b[20:], uint32(slots))
	for i, e := range entries {
		binary.LittleEndian.PutUint16(b[l.SlotsOffset+2*i:], uint16(e.Semaphore))
	}
	copy(b[l.StringsOffset:], s.String())
	binary.LittleEndian.PutUint32(b[16:], checksum(b[l.SlotsOffset:]))
	return Image{Layout: l, Bytes: b}, nil
}

// Site is a probe found in a linked table. Entry.Semaphore is the probe's
// slot index; Semaphore is the slot's address, which other sites of the
// table may share.
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
	slots := int(binary.LittleEndian.Uint32(b[20:]))
	if n > maxCount || slots > maxCount || size > len(b) || size%8 != 0 {
		return nil, 0, ErrNotTable
	}
	l := newLayout(n, slots, 0)
	if l.StringsOffset >= size { // the strings hold at least the package's NUL
		return nil, 0, ErrNotTable
	}
	if checksum(b[l.SlotsOffset:size]) != binary.LittleEndian.Uint32(b[16:]) {
		return nil, 0, ErrNotTable
	}
	fields := make([]string, 0, 1+4*n)
	rest := b[l.StringsOffset:size]
	for len(fields) < 1+3*n {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil, 0, ErrNotTable
		}
		fields = append(fields, string(rest[:i]))
		rest = rest[i+1:]
	}
	kinds, err := decodeKinds(rest, n)
	if err != nil {
		return nil, 0, err
	}
	pkg, fields := fields[0], fields[1:]
	sites := make([]Site, n)
	for i := range sites {
		slot := int(binary.LittleEndian.Uint16(b[l.SlotsOffset+2*i:]))
		if slot >= slots {
			return nil, 0, ErrNotTable
		}
		sites[i] = Site{
			Package:   pkg,
			Entry:     Entry{Provider: fields[3*i], Name: fields[3*i+1], Args: fields[3*i+2], Semaphore: slot, Kinds: kinds[i]},
			Stub:      binary.LittleEndian.Uint64(b[l.StubsOffset+8*i:]),
			Semaphore: addr + uint64(l.SemaphoreOffset(slot)),
		}
	}
	for _, s := range sites {
		if s.Stub == 0 {
			return nil, 0, fmt.Errorf("probetable: probe %s:%s has no stub address", s.Provider, s.Name)
		}
	}
	return sites, size, nil
}

// kindsMarker starts the kinds: what follows the args in an older table is
// padding.
const kindsMarker = "kinds"

// decodeKinds reads the kinds of n probes from the rest of a table's
// strings. A table without them gives nil kinds.
// Kinds may be Invalid where this decoder does not know their name.
func decodeKinds(rest []byte, n int) ([][]probe.Kind, error) {
	kinds := make([][]probe.Kind, n)
	rest, ok := bytes.CutPrefix(rest, []byte(kindsMarker+"\x00"))
	if !ok {
		return kinds, nil
	}
	for i := range kinds {
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return nil, ErrNotTable
		}
		field := string(rest[:j])
		rest = rest[j+1:]
		if field == "" {
			continue
		}
		for _, name := range strings.Split(field, ",") {
			// A kind newer than this decoder stays Invalid: a tracer shows
			// it as an integer.
			k, _ := probe.KindNamed(name)
			kinds[i] = append(kinds[i], k)
		}
	}
	return kinds, nil
}
