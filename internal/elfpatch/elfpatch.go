// Package elfpatch adds USDT probe notes to an executable that has already
// been linked. It is what the link step of usdt-toolexec runs: Go's internal
// linker drops non-allocated sections of host objects and cannot relocate a
// companion object against Go symbols, so the notes cannot come from the
// link itself (see docs/design.md, "Getting the notes into a Go binary").
//
// The patch never moves or resizes a loaded byte. It only adds section
// headers that describe bytes already in the file, appends a non-allocated
// note section, and writes a new section header table at the end:
//
//   - .stapsdt.base: 1-byte overlay whose address goes in every note's base
//     field; gdb lists no probe without it and perf turns a pc into a file
//     offset with it.
//   - .probes: overlay over the semaphores, because bcc (tplist, bpftrace
//     0.17) and perf compute a semaphore's file offset from the first
//     .probes section header and never enable a semaphore without one.
//   - .note.stapsdt: the notes, SHT_NOTE and not SHF_ALLOC (perf refuses an
//     allocated one). bcc 0.26 looks for .probes only after the first
//     executable section and for the note only after .probes, so the note
//     comes last in the header table.
//
// Overlays are invisible to the loader but not to binutils: GNU strip and
// objcopy (2.40) give an overlay its own file space when they rewrite the
// file, which moves .probes away from the semaphores it describes, and a
// tracer then increments the wrong bytes. Strip with the Go linker's -s -w,
// which runs before the patch, never with strip after it.
package elfpatch

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/sdtnote"
)

// Names of the sections this package adds or reuses.
const (
	baseName   = ".stapsdt.base"
	probesName = ".probes"
	noteName   = sdtnote.SectionName
)

// ELF64 layout constants: the package only writes 64-bit little-endian
// files, so it addresses header fields by offset instead of decoding whole
// structures it must then re-encode byte for byte.
const (
	ehSize      = 64
	ehShoff     = 0x28
	ehShentsize = 0x3a
	ehShnum     = 0x3c
	ehShstrndx  = 0x3e
	shdrSize    = 64
)

var le = binary.LittleEndian

// AddNotes rewrites the ELF executable at path so that every USDT consumer
// (bpftrace, bcc, perf, gdb, readelf) sees the sites find finds in its
// bytes as stapsdt probes, from their Provider, Name, Spec, PC and
// Semaphore address, and returns those sites: the file is read once,
// mapped, for both. Notes already in the file (a cgo binary whose C
// objects carried sys/sdt.h probes) are kept, each probe appearing once.
// With no sites the file is left untouched. The file is patched in place,
// since it is a build product that was just written; a failure leaves it
// as it was.
func AddNotes(path string, find func(image []byte) ([]probe.Probe, error)) ([]probe.Probe, error) {
	sites, err := addNotes(path, find)
	if err != nil {
		return nil, fmt.Errorf("elfpatch: %s: %w", path, err)
	}
	return sites, nil
}

func addNotes(path string, find func(image []byte) ([]probe.Probe, error)) ([]probe.Probe, error) {
	f, err := openWritable(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data, err := mapFile(f, fi.Size())
	if err != nil {
		return nil, err
	}
	if data != nil {
		defer syscall.Munmap(data)
	}
	sites, err := find(data)
	if err != nil || len(sites) == 0 {
		return nil, err
	}
	e, err := patch(data, sites)
	if err != nil {
		return nil, err
	}
	return sites, writeInPlace(f, fi.Size(), e)
}

// openWritable opens path for writing. A umask such as 0222 leaves the
// linker's output without its owner's write bit, which stops no one from
// building, so neither may it stop the patch: the owner gets the bit for
// as long as it takes to open the file, and the file keeps its mode.
func openWritable(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if !errors.Is(err, fs.ErrPermission) {
		return f, err
	}
	fi, statErr := os.Stat(path)
	if statErr != nil || fi.Mode().Perm()&0o200 != 0 || os.Chmod(path, fi.Mode()|0o200) != nil {
		return nil, err
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0)
	if chmodErr := os.Chmod(path, fi.Mode()); err == nil && chmodErr != nil {
		f.Close()
		return nil, chmodErr
	}
	return f, err
}

// mapFile maps size bytes of f read-only: its pages are already in the
// page cache, just written by the linker, and reading them into a new
// buffer would fault in as many fresh pages. An empty file has nothing
// to map: patch rejects it as no ELF file.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

// edit is how patch changes a file: its first keep bytes stay, but for
// the ELF header, which header replaces, and the chunks of tail follow
// them. The kept bytes are most of an executable: leaving them where they
// are, not copying them into a new file or buffer, is what makes the link
// step cheap (a 9 MB buffer costs 100-200 ms of page faults here, and
// copying a 10 MB file in the kernel, then dropping the old one, 10 ms).
type edit struct {
	header []byte
	keep   uint64
	tail   [][]byte
}

// shdr is one raw ELF64 section header.
type shdr struct {
	name            uint32
	typ             elf.SectionType
	flags           elf.SectionFlag
	addr, off, size uint64
	link, info      uint32
	align, entsize  uint64
	str             string // resolved name
	index           int
}

func (h *shdr) isAlloc() bool  { return h.flags&elf.SHF_ALLOC != 0 }
func (h *shdr) isWrite() bool  { return h.flags&elf.SHF_WRITE != 0 }
func (h *shdr) isExec() bool   { return h.flags&elf.SHF_EXECINSTR != 0 }
func (h *shdr) isNobits() bool { return h.typ == elf.SHT_NOBITS }

func (h *shdr) decode(b []byte) {
	h.name = le.Uint32(b[0:])
	h.typ = elf.SectionType(le.Uint32(b[4:]))
	h.flags = elf.SectionFlag(le.Uint64(b[8:]))
	h.addr = le.Uint64(b[16:])
	h.off = le.Uint64(b[24:])
	h.size = le.Uint64(b[32:])
	h.link = le.Uint32(b[40:])
	h.info = le.Uint32(b[44:])
	h.align = le.Uint64(b[48:])
	h.entsize = le.Uint64(b[56:])
}

func (h *shdr) encode() []byte {
	b := make([]byte, shdrSize)
	le.PutUint32(b[0:], h.name)
	le.PutUint32(b[4:], uint32(h.typ))
	le.PutUint64(b[8:], uint64(h.flags))
	le.PutUint64(b[16:], h.addr)
	le.PutUint64(b[24:], h.off)
	le.PutUint64(b[32:], h.size)
	le.PutUint32(b[40:], h.link)
	le.PutUint32(b[44:], h.info)
	le.PutUint64(b[48:], h.align)
	le.PutUint64(b[56:], h.entsize)
	return b
}

// contains reports whether the section's addresses cover [addr, addr+n).
func (h *shdr) contains(addr, n uint64) bool {
	return h.isAlloc() && addr >= h.addr && addr+n <= h.addr+h.size && addr+n > addr
}

// delta is the constant vaddr-minus-offset of the section. perf and bcc
// translate a pc or semaphore address to a file offset through a different
// section's header (.stapsdt.base, .probes), which is only right when both
// sections share this delta.
func (h *shdr) delta() uint64 { return h.addr - h.off }

func (h *shdr) describe() string {
	if h.str == "" {
		return fmt.Sprintf("section %d", h.index)
	}
	return fmt.Sprintf("section %d (%s)", h.index, h.str)
}

// image is the parsed file being patched.
type image struct {
	data     []byte
	f        *elf.File
	shoff    uint64
	shstrndx int
	secs     []*shdr
}

func load(data []byte) (*image, error) {
	if len(data) < elf.EI_NIDENT || string(data[:4]) != elf.ELFMAG {
		return nil, errors.New("not an ELF file")
	}
	switch elf.Class(data[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
	case elf.ELFCLASS32:
		return nil, errors.New("32-bit ELF (ELFCLASS32) is not supported: probes are only written for 64-bit targets")
	default:
		return nil, fmt.Errorf("unknown ELF class %d", data[elf.EI_CLASS])
	}
	switch elf.Data(data[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
	case elf.ELFDATA2MSB:
		return nil, errors.New("big-endian ELF is not supported: probes are only written for little-endian targets")
	default:
		return nil, fmt.Errorf("unknown ELF data encoding %d", data[elf.EI_DATA])
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("malformed ELF file: %w", err)
	}
	if f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 {
		return nil, fmt.Errorf("unsupported machine %v: want EM_X86_64 or EM_AARCH64", f.Machine)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("unsupported ELF type %v: want an executable (ET_EXEC or ET_DYN)", f.Type)
	}
	im := &image{data: data, f: f, shoff: le.Uint64(data[ehShoff:])}
	if im.shoff == 0 || len(f.Sections) == 0 {
		return nil, errors.New("no section header table: consumers find probes through section headers")
	}
	if n := le.Uint16(data[ehShentsize:]); n != shdrSize {
		return nil, fmt.Errorf("section header size %d, want %d", n, shdrSize)
	}
	n := uint64(len(f.Sections)) // debug/elf has resolved extended numbering
	if im.shoff > uint64(len(data)) || n*shdrSize > uint64(len(data))-im.shoff {
		return nil, errors.New("section header table runs past the end of the file")
	}
	for i := range f.Sections {
		h := &shdr{index: i}
		h.decode(data[im.shoff+uint64(i)*shdrSize:])
		h.str = f.Sections[i].Name
		im.secs = append(im.secs, h)
	}
	im.shstrndx = int(le.Uint16(data[ehShstrndx:]))
	if im.shstrndx == int(elf.SHN_XINDEX) {
		im.shstrndx = int(im.secs[0].link)
	}
	if im.shstrndx <= 0 || im.shstrndx >= len(im.secs) || im.secs[im.shstrndx].typ != elf.SHT_STRTAB {
		return nil, errors.New("no section name string table")
	}
	if st := im.secs[im.shstrndx]; st.off > uint64(len(data)) || st.size > uint64(len(data))-st.off {
		return nil, errors.New("section name string table runs past the end of the file")
	}
	return im, nil
}

// sectionAt returns the section holding [addr, addr+n) that matches keep.
// Overlays (a .probes or .stapsdt.base left by an earlier patch) sit inside
// the real section, so the largest match is the real one.
func (im *image) sectionAt(addr, n uint64, keep func(*shdr) bool) *shdr {
	var best *shdr
	for _, h := range im.secs {
		if h.typ == elf.SHT_NULL || !h.contains(addr, n) || !keep(h) {
			continue
		}
		if best == nil || h.size > best.size {
			best = h
		}
	}
	return best
}

func (im *image) named(name string) []*shdr {
	var out []*shdr
	for _, h := range im.secs {
		if h.str == name && h.typ != elf.SHT_NULL {
			out = append(out, h)
		}
	}
	return out
}

func siteName(s probe.Probe) string { return s.Provider + ":" + s.Name }

// patch returns the edit that adds the notes for sites to data. It is a
// pure function of its input, so the same executable and sites give the
// same bytes.
func patch(data []byte, sites []probe.Probe) (edit, error) {
	im, err := load(data)
	if err != nil {
		return edit{}, err
	}
	for _, s := range sites {
		if s.Provider == "" || s.Name == "" {
			return edit{}, fmt.Errorf("probe %q has an empty provider or name", siteName(s))
		}
		if strings.IndexByte(s.Provider, 0) >= 0 || strings.IndexByte(s.Name, 0) >= 0 || strings.IndexByte(s.Spec, 0) >= 0 {
			return edit{}, fmt.Errorf("probe %q: names and arguments must not contain NUL bytes", siteName(s))
		}
	}

	text, err := im.codeSection(sites)
	if err != nil {
		return edit{}, err
	}
	var newHdrs []*shdr
	var newNames []string

	// Base: reuse the C toolchain's .stapsdt.base so that old and new notes
	// agree; otherwise overlay the last byte of the code section. The last
	// byte, not the first: gdb drops the later-starting of two overlapping
	// sections from its address map, so the overlay is the one it ignores.
	// A byte of the code section also gives perf the right offset delta.
	var base uint64
	if old := im.named(baseName); len(old) > 0 {
		b := old[0]
		if !b.isAlloc() {
			return edit{}, fmt.Errorf("existing %s is not an allocated section", baseName)
		}
		if b.delta() != text.delta() {
			return edit{}, fmt.Errorf("existing %s (address-offset %#x) and the probe code in %s (%#x) are in differently placed segments: perf would misplace the probes",
				baseName, b.delta(), text.str, text.delta())
		}
		base = b.addr
	} else {
		base = text.addr + text.size - 1
		newHdrs = append(newHdrs, &shdr{typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC,
			addr: base, off: text.off + text.size - 1, size: 1, align: 1})
		newNames = append(newNames, baseName)
	}

	probes, err := im.semaphoreOverlay(sites)
	if err != nil {
		return edit{}, err
	}
	if probes != nil {
		newHdrs = append(newHdrs, probes)
		newNames = append(newNames, probesName)
	}

	// Old notes first, in file order, then the new ones in the caller's
	// order; a site already described (a second run over the same file)
	// is not described twice. Sites are stubs at addresses of their own,
	// so only the old notes need an index, and a binary has few or none.
	old, err := sdtnote.Read(im.f)
	if err != nil {
		return edit{}, err
	}
	type key struct {
		provider, name string
		pc             uint64
	}
	described := make(map[key]bool, len(old))
	notes := append(make([]sdtnote.Note, 0, len(old)+len(sites)), old...)
	for _, n := range old {
		described[key{n.Provider, n.Name, n.PC}] = true
	}
	for _, s := range sites {
		if described[key{s.Provider, s.Name, s.PC}] {
			continue
		}
		notes = append(notes, sdtnote.Note{Provider: s.Provider, Name: s.Name, Args: s.Spec,
			PC: s.PC, Base: base, Semaphore: s.Semaphore})
	}
	noteData := sdtnote.Encode(notes, le)

	// Retire every old note section: its notes now live in the new one, and
	// readelf -n reads any SHT_NOTE whatever its name. An all-zero header is
	// the canonical inactive entry (like section 0); BFD, libelf and
	// debug/elf skip it, and indices of the other sections do not move.
	for _, h := range im.secs {
		if h.typ == elf.SHT_NOTE && h.str == noteName {
			*h = shdr{index: h.index}
		}
	}

	// File layout: the original bytes (minus a trailing section header
	// table, which is replaced), the note, a new .shstrtab if names had to
	// be added, and the new section header table.
	end := im.reusableEnd()
	var tail [][]byte
	size := end // of the file so far
	add := func(b []byte) {
		tail = append(tail, b)
		size += uint64(len(b))
	}
	padTo := func(align uint64) {
		if n := (align - size%align) % align; n > 0 {
			add(make([]byte, n))
		}
	}
	padTo(4)
	noteOff := size
	add(noteData)
	newHdrs = append(newHdrs, &shdr{typ: elf.SHT_NOTE, off: noteOff, size: uint64(len(noteData)), align: 4})
	newNames = append(newNames, noteName)

	strtab := im.secs[im.shstrndx]
	oldStr := data[strtab.off : strtab.off+strtab.size]
	strs, offs := addStrings(oldStr, newNames)
	if len(strs) != len(oldStr) {
		strtab.off = size
		strtab.size = uint64(len(strs))
		add(strs)
	}
	for i, h := range newHdrs {
		h.name = offs[i]
	}

	padTo(8)
	shoff := size
	all := append(append([]*shdr(nil), im.secs...), newHdrs...)
	table := make([]byte, 0, len(all)*shdrSize)
	for _, h := range all {
		table = append(table, h.encode()...)
	}
	sec0 := table[:shdrSize]
	add(table)

	// ELF header: new table position and count. Past SHN_LORESERVE the
	// count moves to section 0's sh_size (ELF extended numbering).
	header := append([]byte(nil), data[:ehSize]...)
	le.PutUint64(header[ehShoff:], shoff)
	count := uint64(len(all))
	if count >= uint64(elf.SHN_LORESERVE) {
		le.PutUint16(header[ehShnum:], 0)
		le.PutUint64(sec0[32:], count)
	} else {
		le.PutUint16(header[ehShnum:], uint16(count))
		le.PutUint64(sec0[32:], 0)
	}
	return edit{header: header, keep: end, tail: tail}, nil
}

// codeSection checks that every pc lies in executable code and returns the
// section holding the lowest one. All pcs must share its address-offset
// delta, since every note shares one base.
func (im *image) codeSection(sites []probe.Probe) (*shdr, error) {
	var text, h *shdr
	lowest := ^uint64(0)
	for _, s := range sites {
		// Sites come in runs of one section.
		if h == nil || !h.contains(s.PC, 1) {
			h = im.sectionAt(s.PC, 1, func(h *shdr) bool { return h.isExec() && !h.isNobits() })
		}
		if h == nil {
			return nil, fmt.Errorf("probe %s: pc %#x is not inside an executable section", siteName(s), s.PC)
		}
		if text != nil && h.delta() != text.delta() {
			return nil, fmt.Errorf("probe %s: pc %#x is in %s, placed differently from %s: one .stapsdt.base cannot serve both",
				siteName(s), s.PC, h.describe(), text.describe())
		}
		if s.PC < lowest {
			lowest, text = s.PC, h
		}
	}
	return text, nil
}

// semaphoreOverlay checks the semaphores and returns the .probes header to
// add, or nil when no site has a semaphore or an existing .probes already
// covers them all.
func (im *image) semaphoreOverlay(sites []probe.Probe) (*shdr, error) {
	var sec, h *shdr
	var lo, hi uint64
	for _, s := range sites {
		a := s.Semaphore
		if a == 0 {
			continue
		}
		if a%2 != 0 {
			return nil, fmt.Errorf("probe %s: semaphore %#x is not 2-byte aligned", siteName(s), a)
		}
		// Semaphores come in runs of one section.
		if sec == nil || !sec.contains(a, 2) {
			h = im.sectionAt(a, 2, func(*shdr) bool { return true })
		}
		switch {
		case h == nil:
			return nil, fmt.Errorf("probe %s: semaphore %#x is outside every allocated section", siteName(s), a)
		case h.isNobits():
			return nil, fmt.Errorf("probe %s: semaphore %#x is in %s, which is NOBITS (zero-filled, not file-backed): the kernel only updates semaphores in file-backed mappings; give the variable a non-zero initial byte so the linker puts it in .noptrdata",
				siteName(s), a, h.describe())
		case !h.isWrite():
			return nil, fmt.Errorf("probe %s: semaphore %#x is in %s, which is not writable", siteName(s), a, h.describe())
		}
		if sec == nil {
			sec, lo, hi = h, a, a+2
		} else if h != sec {
			return nil, fmt.Errorf("probe %s: semaphore %#x is in %s but others are in %s: one .probes section must cover them all",
				siteName(s), a, h.describe(), sec.describe())
		}
		// An automatic probe's semaphore is the low half of its slot:
		// the section covers the ring's half too.
		size := uint64(2)
		if s.WideSemaphore {
			size = 4
		}
		lo, hi = min(lo, a), max(hi, a+size)
	}
	if sec == nil {
		return nil, nil
	}
	// The kernel maps the semaphore by file offset: a writable PT_LOAD
	// must back it from the file, at the offset the section header says.
	off := sec.off + (lo - sec.addr)
	backed := false
	for _, p := range im.f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 && lo >= p.Vaddr && hi <= p.Vaddr+p.Filesz {
			backed = lo-p.Vaddr+p.Off == off
			break
		}
	}
	if !backed {
		return nil, fmt.Errorf("semaphores %#x-%#x in %s are not backed by the file through a writable PT_LOAD segment", lo, hi, sec.describe())
	}
	// bcc and perf translate every semaphore through the first .probes
	// header they meet. A C binary's own .probes comes first, so ours must
	// share its address-offset delta.
	for _, p := range im.named(probesName) {
		if p.delta() != sec.delta() {
			return nil, fmt.Errorf("semaphores in %s (address-offset %#x) and the existing %s (%#x) are in differently placed segments: bcc and perf would enable the wrong bytes",
				sec.describe(), sec.delta(), p.describe(), p.delta())
		}
		if p.isAlloc() && p.addr <= lo && hi <= p.addr+p.size {
			return nil, nil
		}
	}
	return &shdr{typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_WRITE,
		addr: lo, off: off, size: hi - lo, align: 2}, nil
}

// reusableEnd is where appended data may start: the end of the file, or the
// start of the old section header table when it is the file's last thing
// (as ld leaves it), since the patch writes a new one.
func (im *image) reusableEnd() uint64 {
	size := uint64(len(im.data))
	tableEnd := im.shoff + uint64(len(im.secs))*shdrSize
	if tableEnd != size {
		return size
	}
	for _, h := range im.secs {
		if !h.isNobits() && h.typ != elf.SHT_NULL && h.off+h.size > im.shoff {
			return size
		}
	}
	for _, p := range im.f.Progs {
		if p.Off+p.Filesz > im.shoff {
			return size
		}
	}
	return im.shoff
}

// addStrings returns tab with the names appended where it does not already
// hold them, and each name's offset; tab itself is returned when it already
// holds every name. A name may share the tail of a longer string, as ELF
// string tables allow.
func addStrings(tab []byte, names []string) ([]byte, []uint32) {
	out := tab
	copied := false
	offs := make([]uint32, len(names))
	for i, n := range names {
		if j := bytes.Index(out, []byte(n+"\x00")); j >= 0 {
			offs[i] = uint32(j)
			continue
		}
		if !copied {
			out = append([]byte(nil), tab...)
			if len(out) == 0 || out[len(out)-1] != 0 {
				out = append(out, 0)
			}
			copied = true
		}
		offs[i] = uint32(len(out))
		out = append(append(out, n...), 0)
	}
	return out, offs
}

// writeInPlace applies e to f, size bytes long. The tail goes first and
// the ELF header, which makes the new section header table the one readers
// use, last. If a write fails (a full disk), the bytes the tail overwrote
// and the file's length are put back, so the executable is the one the
// linker wrote: a binary without its notes must not look patched.
func writeInPlace(f *os.File, size int64, e edit) (err error) {
	keep := int64(e.keep)
	overwritten := make([]byte, size-keep)
	if _, err := f.ReadAt(overwritten, keep); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Best effort: the link step removes an executable it
			// could not patch.
			f.WriteAt(overwritten, keep)
			f.Truncate(size)
		}
	}()
	tail := 0
	for _, b := range e.tail {
		tail += len(b)
	}
	// The linker allocates its output's blocks up front; the tail's are
	// allocated the same way, or ext4 would delay them, and renaming a
	// file with delayed blocks over another (go build installing the
	// executable) makes ext4 write out every dirty page of the file first:
	// 15 ms for a 27 MB executable. A file system without fallocate
	// just allocates while writing.
	syscall.Fallocate(int(f.Fd()), 0, keep, int64(tail))
	at := keep
	for _, b := range e.tail {
		if _, err := f.WriteAt(b, at); err != nil {
			return err
		}
		at += int64(len(b))
	}
	if err := f.Truncate(at); err != nil {
		return err
	}
	_, err = f.WriteAt(e.header, 0)
	return err
}
