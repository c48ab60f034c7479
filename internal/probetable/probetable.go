// Package probetable encodes the table that carries Plan9-stub probes
// (probe.Probe records) from the compiler to the link step, and on to the
// tracers that read a linked executable.
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
//	..  strings: "package\0", then per probe "provider\0name\0spec\0", then
//	    "kinds\0" and per probe "kind,kind...\0", then "names\0" and per
//	    probe "count\0" and count times "name\0type\0", then, if any probe
//	    has one, "receivers\0" and per probe "receiver\0"; padded to 8 bytes
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
// specs; their decoders ignore the kinds, and for them a probe has no Args.
//
// Names are each argument's declared name and Go type, for a tracer to
// show, as a decimal count and then pairs: the first pairs are the arguments
// the probe passes, one per kind, and any further ones the arguments it
// dropped (probe.Probe.Dropped). Tables written before names existed end
// after the kinds, and decoders that predate names ignore them; from such a
// table a probe's Args have kinds but neither names nor types.
//
// Receivers, after the names, are each probe's probe.Probe.Receiver, one
// string per probe; a table without any has no such part.
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
	"slices"
	"strconv"
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

// Build lays out a table for probes of package pkg, from each probe's
// Provider, Name, Spec, Slot, Args and Dropped. The table has as many
// semaphore slots as the highest Slot of probes plus one.
func Build(pkg string, probes []probe.Probe) (Image, error) {
	if len(probes) > maxCount {
		return Image{}, fmt.Errorf("probetable: %d probes, at most %d fit in a table", len(probes), maxCount)
	}
	var s strings.Builder
	field := func(f string) error {
		if strings.IndexByte(f, 0) >= 0 {
			return fmt.Errorf("probetable: NUL byte in %q", f)
		}
		s.WriteString(f + "\x00")
		return nil
	}
	if err := field(pkg); err != nil {
		return Image{}, err
	}
	slots := 0
	for _, p := range probes {
		if p.Slot < 0 || p.Slot >= maxCount {
			return Image{}, fmt.Errorf("probetable: probe %s:%s has semaphore slot %d, outside [0, %d)", p.Provider, p.Name, p.Slot, maxCount)
		}
		slots = max(slots, p.Slot+1)
		for _, f := range []string{p.Provider, p.Name, p.Spec} {
			if err := field(f); err != nil {
				return Image{}, err
			}
		}
	}
	s.WriteString(kindsMarker + "\x00")
	for _, p := range probes {
		names := make([]string, len(p.Args))
		for i, a := range p.Args {
			names[i] = a.Kind.String()
		}
		s.WriteString(strings.Join(names, ",") + "\x00")
	}
	s.WriteString(namesMarker + "\x00")
	for _, p := range probes {
		args := append(slices.Clip(p.Args), p.Dropped...)
		s.WriteString(strconv.Itoa(len(args)) + "\x00")
		for _, a := range args {
			if err := field(a.Name); err != nil {
				return Image{}, err
			}
			if err := field(a.Type); err != nil {
				return Image{}, err
			}
		}
	}
	if slices.ContainsFunc(probes, func(p probe.Probe) bool { return p.Receiver != "" }) {
		s.WriteString(receiversMarker + "\x00")
		for _, p := range probes {
			if err := field(p.Receiver); err != nil {
				return Image{}, err
			}
		}
	}
	l := newLayout(len(probes), slots, pad8(s.Len()))
	b := make([]byte, l.Size)
	copy(b, Magic[:])
	binary.LittleEndian.PutUint32(b[8:], uint32(l.Count))
	binary.LittleEndian.PutUint32(b[12:], uint32(l.Size))
	binary.LittleEndian.PutUint32(b[20:], uint32(slots))
	for i, p := range probes {
		binary.LittleEndian.PutUint16(b[l.SlotsOffset+2*i:], uint16(p.Slot))
	}
	copy(b[l.StringsOffset:], s.String())
	binary.LittleEndian.PutUint32(b[16:], checksum(b[l.SlotsOffset:]))
	return Image{Layout: l, Bytes: b}, nil
}

// ErrNotTable reports bytes that start with the magic but are no table.
var ErrNotTable = errors.New("probetable: not a table")

// Decode reads the table at the start of b, which was loaded at address
// addr. Its probes have all the fields Build reads, and Package, PC and
// Semaphore. It returns the table's size so a scanner can skip past it.
func Decode(b []byte, addr uint64) ([]probe.Probe, int, error) {
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
	r := strs{rest: b[l.StringsOffset:size]}
	pkg := r.next()
	probes := make([]probe.Probe, n)
	for i := range probes {
		p := &probes[i]
		p.Provider, p.Name, p.Spec = r.next(), r.next(), r.next()
		p.Package = pkg
		p.Slot = int(binary.LittleEndian.Uint16(b[l.SlotsOffset+2*i:]))
		if p.Slot >= slots {
			return nil, 0, ErrNotTable
		}
		p.PC = binary.LittleEndian.Uint64(b[l.StubsOffset+8*i:])
		p.Semaphore = addr + uint64(l.SemaphoreOffset(p.Slot))
	}
	if r.marker(kindsMarker) {
		decodeKinds(&r, probes)
	}
	if r.marker(namesMarker) {
		decodeNames(&r, probes)
		if r.marker(receiversMarker) {
			for i := range probes {
				probes[i].Receiver = r.next()
			}
		}
	}
	if r.bad {
		return nil, 0, ErrNotTable
	}
	for _, p := range probes {
		if p.PC == 0 {
			return nil, 0, fmt.Errorf("probetable: probe %s:%s has no stub address", p.Provider, p.Name)
		}
	}
	return probes, size, nil
}

// Markers start the optional parts of the strings: what follows the last
// part in an older table is padding.
const (
	kindsMarker     = "kinds"
	namesMarker     = "names"
	receiversMarker = "receivers"
)

// strs reads a table's NUL-terminated strings. Running out of them makes
// the table bad, not a panic: the bytes may be data that merely passed the
// checksum.
type strs struct {
	rest []byte
	bad  bool
}

func (r *strs) next() string {
	i := bytes.IndexByte(r.rest, 0)
	if i < 0 {
		r.bad = true
		return ""
	}
	s := string(r.rest[:i])
	r.rest = r.rest[i+1:]
	return s
}

// marker consumes the marker m if the strings continue with it.
func (r *strs) marker(m string) bool {
	rest, ok := bytes.CutPrefix(r.rest, []byte(m+"\x00"))
	if ok {
		r.rest = rest
	}
	return ok
}

// decodeKinds gives every probe one argument per kind.
// Kinds may be Invalid where this decoder does not know their name.
func decodeKinds(r *strs, probes []probe.Probe) {
	for i := range probes {
		field := r.next()
		if field == "" {
			continue
		}
		for _, name := range strings.Split(field, ",") {
			// A kind newer than this decoder stays Invalid: a tracer shows
			// it as an integer.
			k, _ := probe.KindNamed(name)
			probes[i].Args = append(probes[i].Args, probe.Arg{Kind: k})
		}
	}
}

// decodeNames names the arguments decodeKinds made, and adds the dropped
// ones.
func decodeNames(r *strs, probes []probe.Probe) {
	for i := range probes {
		p := &probes[i]
		count, err := strconv.Atoi(r.next())
		if err != nil || count < len(p.Args) || count > maxArgs {
			r.bad = true
			return
		}
		for j := range count {
			a := probe.Arg{Name: r.next(), Type: r.next()}
			if j < len(p.Args) {
				p.Args[j].Name, p.Args[j].Type = a.Name, a.Type
			} else {
				p.Dropped = append(p.Dropped, a)
			}
		}
	}
}

// maxArgs bounds the arguments one probe declares, passed and dropped: a
// Go function has fewer than this many parameters or results.
const maxArgs = 1 << 16
