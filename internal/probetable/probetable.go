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
//	0   magic [8]byte, its last byte the version (3, 4 or 5)
//	8   count uint32, size uint32 (whole table), checksum uint32, slots uint32
//	24  semaphores [slots]uint16, slots rounded up to a multiple of 4 (zero in the file, counted by the kernel);
//	    with WideFlag, [slots]uint32, rounded up to a multiple of 2
//	..  stub addresses [count]uint64 (relocated by the linker); versions 4
//	    and 5: one, the first probe's, the others following it SiteSize
//	    bytes apart
//	..  slot of each probe [count]uint16, padded to 8 bytes
//	..  strings, padded to 8 bytes; version 5: deflated (see below)
//
// The strings are a pool, then records that refer to it. The pool holds
// each distinct string once, NUL-terminated, and a reference is its offset
// in the pool: probes repeat providers, specs, kinds, argument names and
// types, and the parts of their names, which is what keeps a table of tens
// of thousands of probes small. All numbers are uvarints:
//
//	pool size, pool bytes (its first string is "")
//	package ref
//	per probe: provider ref; the count of the name's parts and a ref per
//	  part (the name split at "__"); spec ref; kinds ref (the probe.Kind
//	  names of its arguments, comma-separated); the count of declared
//	  arguments and a name ref and a type ref for each (with
//	  LayoutsFlag, a layout ref too); receiver ref
//
// A version byte with LayoutsFlag set (0x13, 0x14, 0x15) is the version
// without it whose records also give each declared argument's layout
// (probe.Arg.Layout, internal/layout's encoding, "" for none). Build sets
// it only for tables with a layout, so tables without one stay readable
// by tracers older than layouts.
//
// Version 5, for the tens of thousands of probes that instrumenting every
// function gives, stores the strings as a uvarint, their size, then their
// raw DEFLATE stream (RFC 1951). The records repeat references in patterns
// that compress about threefold, and a table's bytes stay in the
// executable's memory image, so the link step and the tracers that read it
// pay the inflating instead. Build writes it for stubs back to back unless
// the strings as they are, version 4, take no more room.
//
// The first declared arguments are those the probe passes, one per kind,
// and any further ones the arguments it dropped (probe.Probe.Dropped).
// Kinds let a tracer tell a string's pointer from an integer, which the
// argument spec does not; names and Go types are what a tracer shows.
//
// Version 2 tables, which binaries built before the pool hold, are still
// read: their strings are "package\0", then per probe
// "provider\0name\0spec\0", then optionally "kinds\0" and per probe
// "kind,kind...\0", then optionally "names\0" and per probe "count\0"
// and count times "name\0type\0". A part missing from an older table
// leaves its fields empty; no version 2 table records receivers.
//
// A version byte with WideFlag set (0x24, 0x25, 0x34, 0x35: automatic
// probes, whose stubs are back to back) gives each probe a 32-bit slot:
// its semaphore, the address its note gives, is the slot's low half,
// which the kernel and every USDT consumer count uprobes in, and the
// high half is the in-process ring's flag (see internal/ring), which its
// tracer sets to 1 and clears with plain 2-byte writes, never touching
// the kernel's count. The probe's gate loads the whole slot. A tracer
// older than the flag finds no such table, so never writes to one.
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
// Version 6 describes note-only probes (rules' sites: notes), which have
// no stub: it has no semaphores (slots is 0) and no stub address, its
// strings are deflated as version 5's, and each record ends with a
// reference to Probe.Func, the linker's name of the function whose own
// instructions the probe's notes point at (see internal/funcsites). Its
// probes' PCs are found in the executable from that name.
//
// The package is the import path of the package whose functions
// usdt-toolexec instrumented, and empty for usdtgen's tables.
package probetable

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/go-usdt/usdt/internal/probe"
)

// Magic starts every table Build writes: its first seven bytes are not
// valid UTF-8 nor a plausible pointer, so data that merely happens to hold
// them is rare, and the checksum rejects the rest. The last byte is the
// version: Magic's, or version4 or version5 for a table of stubs back to
// back.
var Magic = [8]byte{0x7f, 'U', 'S', 'D', 'T', 'g', 'o', version}

// version is the layout Build writes for stubs anywhere, version5 or
// version4 the one for stubs back to back, with strings deflated or as they
// are; the decoder also reads version2.
const (
	version  = 0x03
	version5 = 0x05
	version4 = 0x04
	version2 = 0x02
	version6 = 0x06
)

// SiteSize is how far apart the stubs of a version 4 or 5 table are: one
// address then serves all of them, where version 3 needs 8 bytes, and a
// relocation, per probe.
const SiteSize = 8

// LayoutsFlag marks, in the version byte, records with argument layouts.
const LayoutsFlag = 0x10

// WideFlag marks, in the version byte of a table of stubs back to back,
// 32-bit semaphore slots, the semaphore their low half.
const WideFlag = 0x20

// isMagic reports whether b starts with the magic of a version the decoder
// reads.
func isMagic(b []byte) bool {
	if len(b) < len(Magic) || !bytes.Equal(b[:len(Magic)-1], Magic[:len(Magic)-1]) {
		return false
	}
	v := b[len(Magic)-1]
	if v&WideFlag != 0 {
		return backToBack(v)
	}
	if v&LayoutsFlag != 0 {
		v &^= LayoutsFlag
		return v == version || v == version5 || v == version4 || v == version6
	}
	return v == version || v == version5 || v == version4 || v == version6 || v == version2
}

// backToBack reports whether a table of version v holds one stub address.
func backToBack(v byte) bool {
	v &^= LayoutsFlag | WideFlag
	return v == version4 || v == version5
}

// slotSize is the bytes of each semaphore slot of a table of version v.
func slotSize(v byte) int {
	if v&WideFlag != 0 {
		return 4
	}
	return 2
}

// notesOnly reports a version 6 table, of note-only probes.
func notesOnly(v byte) bool { return v&^(LayoutsFlag|WideFlag) == version6 }

// stubAddresses is how many stub addresses a table of count probes
// whose version is v holds.
func stubAddresses(v byte, count int) int {
	switch {
	case notesOnly(v):
		return 0
	case backToBack(v):
		return min(count, 1)
	}
	return count
}

const headerSize = 24

// maxCount bounds a table's probes and semaphore slots: a slot index is a
// uint16.
const maxCount = 1 << 16

// Layout gives the offsets of a table's parts, which the Go declaration of
// the table's symbol must reproduce exactly.
type Layout struct {
	Count          int
	SemaphoreSlots int // slots rounded up to 8 bytes
	// SlotSize is the bytes of a semaphore slot: 2, or 4 for WideFlag's.
	SlotSize      int
	StubsOffset   int
	SlotsOffset   int // the slot index of each probe
	StringsOffset int
	Size          int
}

// SemaphoreOffset is the offset of semaphore slot i from the table start.
func (l Layout) SemaphoreOffset(i int) int { return headerSize + l.SlotSize*i }

// TailWords is how many uint64 follow the semaphores (stubs, slot indexes
// and strings).
func (l Layout) TailWords() int { return (l.Size - l.StubsOffset) / 8 }

// Stubs is how many stub addresses the table holds.
func (l Layout) Stubs() int { return (l.SlotsOffset - l.StubsOffset) / 8 }

func pad8(n int) int { return (n + 7) &^ 7 }

// newLayout lays out a table of version v of count probes sharing slots
// semaphores, with a strings blob of blobSize bytes (already padded).
func newLayout(v byte, count, slots, blobSize int) Layout {
	size := slotSize(v)
	perWord := 8 / size
	l := Layout{Count: count, SemaphoreSlots: (slots + perWord - 1) / perWord * perWord, SlotSize: size}
	stubs := stubAddresses(v, count)
	l.StubsOffset = headerSize + size*l.SemaphoreSlots
	l.SlotsOffset = l.StubsOffset + 8*stubs
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
// Provider, Name, Spec, Slot, Args, Dropped and Receiver. The table has as
// many semaphore slots as the highest Slot of probes plus one. With
// backToBack, the probes' stubs follow each other SiteSize bytes apart, the
// table holds the first one's address only, and its strings are deflated
// (version 5) if that makes them smaller (version 4 if not). Probes with
// a Func, which have no stub, make a table of their own: version 6.
func Build(pkg string, probes []probe.Probe, backToBack bool) (Image, error) {
	if len(probes) > maxCount {
		return Image{}, fmt.Errorf("probetable: %d probes, at most %d fit in a table", len(probes), maxCount)
	}
	notes := len(probes) > 0 && probes[0].Func != ""
	if slices.ContainsFunc(probes, func(p probe.Probe) bool { return (p.Func != "") != notes || notes && p.Slot != 0 }) {
		return Image{}, errors.New("probetable: a table holds probes with stubs or note-only probes (Func, no semaphore), not both")
	}
	w := newPool()
	var rec []byte
	put := func(v int) { rec = binary.AppendUvarint(rec, uint64(v)) }
	put(w.ref(pkg))
	layouts := slices.ContainsFunc(probes, func(p probe.Probe) bool {
		return slices.ContainsFunc(p.Args, func(a probe.Arg) bool { return a.Layout != "" }) ||
			slices.ContainsFunc(p.Dropped, func(a probe.Arg) bool { return a.Layout != "" })
	})
	slots := 0
	for _, p := range probes {
		if p.Slot < 0 || p.Slot >= maxCount {
			return Image{}, fmt.Errorf("probetable: probe %s:%s has semaphore slot %d, outside [0, %d)", p.Provider, p.Name, p.Slot, maxCount)
		}
		if !notes {
			slots = max(slots, p.Slot+1)
		}
		put(w.ref(p.Provider))
		parts := strings.Split(p.Name, nameSep)
		put(len(parts))
		for _, part := range parts {
			put(w.ref(part))
		}
		put(w.ref(p.Spec))
		kinds := make([]string, len(p.Args))
		for i, a := range p.Args {
			kinds[i] = a.Kind.String()
		}
		put(w.ref(strings.Join(kinds, ",")))
		args := append(slices.Clip(p.Args), p.Dropped...)
		put(len(args))
		for _, a := range args {
			put(w.ref(a.Name))
			put(w.ref(a.Type))
			if layouts {
				put(w.ref(a.Layout))
			}
		}
		put(w.ref(p.Receiver))
		if notes {
			put(w.ref(p.Func))
		}
	}
	if w.err != nil {
		return Image{}, w.err
	}
	blob := append(binary.AppendUvarint(nil, uint64(len(w.pool))), w.pool...)
	blob = append(blob, rec...)
	ver := byte(version)
	switch {
	case notes:
		ver, blob = version6, deflate(blob)
	case backToBack:
		ver = version4
		// A few probes' strings deflate to more than they are.
		if d := deflate(blob); pad8(len(d)) < pad8(len(blob)) {
			ver, blob = version5, d
		}
		ver |= WideFlag
	}
	if layouts {
		ver |= LayoutsFlag
	}
	l := newLayout(ver, len(probes), slots, pad8(len(blob)))
	b := make([]byte, l.Size)
	copy(b, Magic[:])
	b[len(Magic)-1] = ver
	binary.LittleEndian.PutUint32(b[8:], uint32(l.Count))
	binary.LittleEndian.PutUint32(b[12:], uint32(l.Size))
	binary.LittleEndian.PutUint32(b[20:], uint32(slots))
	for i, p := range probes {
		binary.LittleEndian.PutUint16(b[l.SlotsOffset+2*i:], uint16(p.Slot))
	}
	copy(b[l.StringsOffset:], blob)
	binary.LittleEndian.PutUint32(b[16:], checksum(b[l.SlotsOffset:]))
	return Image{Layout: l, Bytes: b}, nil
}

// deflate is a version 5 table's strings: their size, then their DEFLATE
// stream.
func deflate(blob []byte) []byte {
	var b bytes.Buffer
	b.Write(binary.AppendUvarint(nil, uint64(len(blob))))
	// Writing to a bytes.Buffer at a valid level cannot fail.
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	w.Write(blob)
	w.Close()
	return b.Bytes()
}

// maxInflated bounds what a version 5 table's strings may inflate to, so
// that bytes made up to look like a table cannot make its reader allocate
// without limit. The largest table, 65,536 probes of 12 arguments, each
// with its name and type, needs a fraction of it.
const maxInflated = 256 << 20

// maxRatio is DEFLATE's largest expansion: a 258-byte match coded in two
// bits.
const maxRatio = 1032

// inflaters are DEFLATE readers for reuse: each holds a 32 KB window, and
// an executable has a table for every instrumented package.
var inflaters = sync.Pool{New: func() any { return flate.NewReader(nil) }}

// inflate reverses deflate, reporting whether b held a stream of exactly
// the size it announced. What follows the stream is padding.
func inflate(b []byte) ([]byte, bool) {
	n, k := binary.Uvarint(b)
	// DEFLATE expands a byte into 1,032 at most: bytes that merely passed
	// the checksum cannot make the reader allocate more than that.
	if k <= 0 || n > maxInflated || n > maxRatio*uint64(len(b)-k) {
		return nil, false
	}
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	r.(flate.Resetter).Reset(bytes.NewReader(b[k:]), nil)
	// Room for one byte more than announced, which must not come.
	out := make([]byte, n+1)
	m, err := io.ReadFull(r, out)
	if uint64(m) != n || err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, false
	}
	return out[:n], true
}

// nameSep splits probe names into the parts the pool shares: the entry and
// exit probes of a function differ in their first part only.
const nameSep = "__"

// pool collects the distinct strings of a table.
type pool struct {
	pool []byte
	at   map[string]int
	err  error
}

func newPool() *pool { return &pool{pool: []byte{0}, at: map[string]int{"": 0}} }

// ref is the offset of s in the pool, adding it if need be.
func (w *pool) ref(s string) int {
	if i, ok := w.at[s]; ok {
		return i
	}
	if strings.IndexByte(s, 0) >= 0 && w.err == nil {
		w.err = fmt.Errorf("probetable: NUL byte in %q", s)
	}
	i := len(w.pool)
	w.pool = append(append(w.pool, s...), 0)
	w.at[s] = i
	return i
}

// ErrNotTable reports bytes that start with the magic but are no table.
var ErrNotTable = errors.New("probetable: not a table")

// header checks what the first bytes of b say of a table there, its
// checksum included, and returns its number of probes and its size.
func header(b []byte) (n, size int, err error) {
	if len(b) < headerSize || !isMagic(b) {
		return 0, 0, ErrNotTable
	}
	n = int(binary.LittleEndian.Uint32(b[8:]))
	size = int(binary.LittleEndian.Uint32(b[12:]))
	slots := int(binary.LittleEndian.Uint32(b[20:]))
	if n > maxCount || slots > maxCount || size > len(b) || size%8 != 0 {
		return 0, 0, ErrNotTable
	}
	l := newLayout(b[len(Magic)-1], n, slots, 0)
	if l.StringsOffset >= size { // the strings hold at least the package
		return 0, 0, ErrNotTable
	}
	if checksum(b[l.SlotsOffset:size]) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, 0, ErrNotTable
	}
	return n, size, nil
}

// decodeInto decodes the table b, whose header passed, into probes, one
// for each of its probes: their strings and slots (decodeText), then
// where they are (locateProbes).
func decodeInto(probes []probe.Probe, b []byte, addr uint64) error {
	if err := decodeText(probes, b); err != nil {
		return err
	}
	return locateProbes(probes, b, addr)
}

// decodeText decodes what the table b says of its probes that the link
// does not change: their strings and semaphore slots.
func decodeText(probes []probe.Probe, b []byte) error {
	slots := int(binary.LittleEndian.Uint32(b[20:]))
	ver := b[len(Magic)-1]
	if notesOnly(ver) && slots != 0 {
		return ErrNotTable
	}
	l := newLayout(ver, len(probes), slots, 0)
	for i := range probes {
		p := &probes[i]
		p.Slot = int(binary.LittleEndian.Uint16(b[l.SlotsOffset+2*i:]))
		// A note-only probe has no semaphore: its slot is 0 of none.
		if notesOnly(ver) && p.Slot != 0 || !notesOnly(ver) && p.Slot >= slots {
			return ErrNotTable
		}
	}
	strs := b[l.StringsOffset:]
	layouts := ver&LayoutsFlag != 0
	ver &^= LayoutsFlag | WideFlag
	if ver == version5 || ver == version6 {
		var ok bool
		if strs, ok = inflate(strs); !ok {
			return ErrNotTable
		}
	}
	decode := func(b []byte, probes []probe.Probe) bool { return decodeStrings(b, probes, layouts, ver == version6) }
	if ver == version2 {
		decode = decodeV2
	}
	if !decode(strs, probes) {
		return ErrNotTable
	}
	// Build writes exactly the tables whose probes all have a function
	// (version 6) or none does (the others).
	if slices.ContainsFunc(probes, func(p probe.Probe) bool { return (p.Func == "") == notesOnly(ver) }) {
		return ErrNotTable
	}
	return nil
}

// locateProbes sets the PC and the Semaphore of probes, whose slots
// decodeText read, from the table b loaded at addr. Note-only probes
// have neither: their Func says where they are.
func locateProbes(probes []probe.Probe, b []byte, addr uint64) error {
	slots := int(binary.LittleEndian.Uint32(b[20:]))
	ver := b[len(Magic)-1]
	if notesOnly(ver) {
		return nil
	}
	l := newLayout(ver, len(probes), slots, 0)
	for i := range probes {
		p := &probes[i]
		if backToBack(ver) {
			// An unrelocated first address leaves every PC zero.
			if first := binary.LittleEndian.Uint64(b[l.StubsOffset:]); first != 0 {
				p.PC = first + SiteSize*uint64(i)
			}
		} else {
			p.PC = binary.LittleEndian.Uint64(b[l.StubsOffset+8*i:])
		}
		if p.PC == 0 {
			return fmt.Errorf("probetable: probe %s:%s has no stub address", p.Provider, p.Name)
		}
		p.Semaphore = addr + uint64(l.SemaphoreOffset(p.Slot))
		p.WideSemaphore = l.SlotSize == 4
	}
	return nil
}

// linkInvariant is the part of a table's bytes that linking does not
// change: all but its stub addresses, which are relocated, and its
// semaphores, which are zero until a tracer attaches.
func linkInvariant(b []byte) (head, tail []byte) {
	n := int(binary.LittleEndian.Uint32(b[8:]))
	slots := int(binary.LittleEndian.Uint32(b[20:]))
	l := newLayout(b[len(Magic)-1], n, slots, 0)
	return b[:headerSize], b[l.SlotsOffset:]
}

// decodeStrings reads a table's pool and records into probes, with a
// layout per argument if layouts says the records have them and a
// function if funcs says so, and reports
// whether they were well formed. The bytes may be data that merely passed
// the checksum, so every count and reference is checked, and a bad one
// makes the table bad, not a panic.
func decodeStrings(b []byte, probes []probe.Probe, layouts, funcs bool) bool {
	r := records{rest: b}
	size := r.uvarint()
	if r.bad || size > len(r.rest) {
		return false
	}
	// One string holds the pool: the probes' strings are parts of it, not
	// copies, and a table of thousands of probes repeats most of them.
	r.pool, r.rest = string(r.rest[:size]), r.rest[size:]
	r.kinds = map[int][]probe.Kind{}
	pkg := r.str()
	for i := range probes {
		p := &probes[i]
		p.Package = pkg
		p.Provider = r.str()
		parts := make([]string, r.count())
		for j := range parts {
			parts[j] = r.str()
		}
		p.Name = strings.Join(parts, nameSep)
		p.Spec = r.str()
		kinds := r.kindList()
		if len(kinds) > 0 {
			p.Args = make([]probe.Arg, len(kinds))
		}
		args := r.count()
		if args < len(kinds) {
			return false
		}
		for j := range args {
			a := probe.Arg{Name: r.str(), Type: r.str()}
			if layouts {
				a.Layout = r.str()
			}
			if j < len(kinds) {
				a.Kind = kinds[j]
				p.Args[j] = a
			} else {
				p.Dropped = append(p.Dropped, a)
			}
		}
		p.Receiver = r.str()
		if funcs {
			p.Func = r.str()
		}
		if r.bad {
			return false
		}
	}
	return true
}

// records reads the uvarints of a table's records.
type records struct {
	rest  []byte
	pool  string
	kinds map[int][]probe.Kind // by reference: tables repeat them
	bad   bool
}

// A value larger than the table could mean is bad: a count is at most
// what follows it, and a reference at most the pool's size. (Bounding
// references by maxCount alone lost every probe of a package whose
// layouts made its pool larger, such as net/http's.)
func (r *records) uvarint() int {
	v, n := binary.Uvarint(r.rest)
	if n <= 0 || v > uint64(len(r.rest)+len(r.pool))+maxCount {
		r.bad, r.rest = true, nil
		return 0
	}
	r.rest = r.rest[n:]
	return int(v)
}

// count reads a number of things that follow, each taking a byte at least.
func (r *records) count() int {
	n := r.uvarint()
	if n > len(r.rest) {
		r.bad, r.rest = true, nil
		return 0
	}
	return n
}

func (r *records) str() string { return r.at(r.uvarint()) }

// at is the pool's string at ref.
func (r *records) at(ref int) string {
	if ref >= len(r.pool) {
		r.bad = true
		return ""
	}
	end := strings.IndexByte(r.pool[ref:], 0)
	if end < 0 {
		r.bad = true
		return ""
	}
	return r.pool[ref : ref+end]
}

// kindList reads a reference to comma-separated kind names.
func (r *records) kindList() []probe.Kind {
	ref := r.uvarint()
	if ks, ok := r.kinds[ref]; ok {
		return ks
	}
	ks := parseKinds(r.at(ref))
	r.kinds[ref] = ks
	return ks
}

// parseKinds reads comma-separated probe.Kind names. A kind newer than
// this decoder stays Invalid: a tracer shows it as an integer.
func parseKinds(field string) []probe.Kind {
	if field == "" {
		return nil
	}
	var ks []probe.Kind
	for _, name := range strings.Split(field, ",") {
		k, _ := probe.KindNamed(name)
		ks = append(ks, k)
	}
	return ks
}

// maxArgs bounds the arguments one probe declares, passed and dropped: a
// Go function has fewer than this many parameters or results.
const maxArgs = 1 << 16
