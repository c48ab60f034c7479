package elfpatch

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/sdtnote"
)

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openELF(t *testing.T, p string) *elf.File {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestAddNotesLayout checks the patched file against the contract in
// docs/design.md with debug/elf alone, for every build mode and architecture.
func TestAddNotesLayout(t *testing.T) {
	for _, v := range []variant{exeVariant, pieVariant, strippedVariant, arm64Variant, cgoVariant, cgoPIEVariant} {
		t.Run(v.name, func(t *testing.T) {
			path, b := fresh(t, v)
			orig := readFile(t, path)
			before := openELF(t, path)
			oldNotes, err := sdtnote.Read(before)
			if err != nil {
				t.Fatal(err)
			}
			if b.hasCProbe != (len(oldNotes) == 1) {
				t.Fatalf("pristine binary has %d notes; C probe expected: %v", len(oldNotes), b.hasCProbe)
			}
			hadBase := before.Section(baseName) != nil

			sites := b.sites(v)
			if err := addSites(path, sites); err != nil {
				t.Fatal(err)
			}
			patched := readFile(t, path)
			f := openELF(t, path)

			// Existing section indices and headers are unchanged, except the
			// string table's location and the retired note section.
			n := len(before.Sections)
			for i, old := range before.Sections {
				got := f.Sections[i]
				switch {
				case old.Type == elf.SHT_NOTE && old.Name == noteName:
					if got.Type != elf.SHT_NULL {
						t.Errorf("old note section %d not retired: %+v", i, got.SectionHeader)
					}
				case old.Type == elf.SHT_STRTAB && old.Name == ".shstrtab":
					if got.Name != old.Name {
						t.Errorf("section %d name %q, want %q", i, got.Name, old.Name)
					}
				default:
					if got.SectionHeader != old.SectionHeader {
						t.Errorf("section %d changed:\n got %+v\nwant %+v", i, got.SectionHeader, old.SectionHeader)
					}
				}
			}
			if !reflect.DeepEqual(progs(f), progs(before)) {
				t.Error("program headers changed")
			}
			// Every original byte is still there, but for the ELF header's
			// shoff/shnum and a trailing section header table (ld puts it
			// last; the patch writes a new one in its place).
			keep := len(orig)
			if tail := before.Sections; le.Uint64(orig[ehShoff:])+uint64(len(tail))*shdrSize == uint64(len(orig)) {
				keep = int(le.Uint64(orig[ehShoff:]))
			}
			for i := 0; i < keep; i++ {
				if i >= ehShoff && i < ehShoff+8 || i >= ehShnum && i < ehShnum+2 {
					continue
				}
				if patched[i] != orig[i] {
					t.Fatalf("original byte at %#x changed", i)
				}
			}

			// Appended headers, in order: .stapsdt.base (unless reused),
			// .probes, .note.stapsdt.
			want := []string{baseName, probesName, noteName}
			if hadBase {
				want = want[1:]
			}
			var added []string
			for _, s := range f.Sections[n:] {
				added = append(added, s.Name)
			}
			if !reflect.DeepEqual(added, want) {
				t.Fatalf("added sections %q, want %q", added, want)
			}
			base := f.Sections[n]
			if hadBase {
				base = f.Section(baseName)
			} else {
				text := f.Section(".text")
				if base.Type != elf.SHT_PROGBITS || base.Flags != elf.SHF_ALLOC || base.Size != 1 ||
					base.Addr != text.Addr+text.Size-1 || base.Offset != text.Offset+text.Size-1 {
					t.Errorf(".stapsdt.base %+v, want a 1-byte overlay on the last byte of .text", base.SectionHeader)
				}
			}
			probes := f.Sections[len(f.Sections)-2]
			data := f.Section(".noptrdata")
			if probes.Type != elf.SHT_PROGBITS || probes.Flags != elf.SHF_ALLOC|elf.SHF_WRITE ||
				probes.Addr != b.table+8 || probes.Size != 4 || probes.Offset != data.Offset+(b.table+8-data.Addr) {
				t.Errorf(".probes %+v, want an overlay on %#x..%#x in .noptrdata", probes.SectionHeader, b.table+8, b.table+12)
			}
			if sema := patched[probes.Offset : probes.Offset+4]; !bytes.Equal(sema, make([]byte, 4)) {
				t.Errorf("semaphore bytes % x, want zero", sema)
			}
			note := f.Sections[len(f.Sections)-1]
			if note.Type != elf.SHT_NOTE || note.Flags != 0 || note.Addralign != 4 || note.Offset%4 != 0 || note.Addr != 0 {
				t.Errorf(".note.stapsdt %+v, want a non-allocated SHT_NOTE aligned to 4", note.SectionHeader)
			}

			got, err := sdtnote.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			wantNotes := append([]sdtnote.Note(nil), oldNotes...)
			for _, s := range sites {
				wantNotes = append(wantNotes, sdtnote.Note{Provider: s.Provider, Name: s.Name, Args: s.Spec,
					PC: s.PC, Base: base.Addr, Semaphore: s.Semaphore})
			}
			if !reflect.DeepEqual(got, wantNotes) {
				t.Errorf("notes:\n got %+v\nwant %+v", got, wantNotes)
			}
			if base.Addr == 0 {
				t.Error("base is zero")
			}

			// Same input, same bytes.
			again, _ := fresh(t, v)
			if err := addSites(again, sites); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readFile(t, again), patched) {
				t.Error("patching the same input twice gave different bytes")
			}

			// Patching the result again describes each probe once and adds
			// no second overlay.
			if err := addSites(path, sites); err != nil {
				t.Fatal(err)
			}
			f2 := openELF(t, path)
			got2, err := sdtnote.Read(f2)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got2, wantNotes) {
				t.Errorf("after a second patch, notes:\n got %+v\nwant %+v", got2, wantNotes)
			}
			if added := f2.Sections[len(f.Sections):]; len(added) != 1 || added[0].Name != noteName {
				t.Errorf("second patch added %d sections, want only a new %s", len(added), noteName)
			}
		})
	}
}

// TestAddNotesSharedSemaphore patches sites of which two share a semaphore,
// as the entry and exit probes of one instrumented function do: each keeps
// its own note with the shared address, and .probes spans every semaphore
// once.
func TestAddNotesSharedSemaphore(t *testing.T) {
	v := exeVariant
	path, b := fresh(t, v)
	sites := []probe.Probe{
		{Provider: "elfpatchtest", Name: "entry", Spec: v.args, PC: b.pc, Semaphore: b.table + 8},
		{Provider: "elfpatchtest", Name: "exit", Spec: v.args, PC: b.pc, Semaphore: b.table + 8},
		{Provider: "elfpatchtest", Name: "other", Spec: v.args, PC: b.pc, Semaphore: b.table + 10},
	}
	if err := addSites(path, sites); err != nil {
		t.Fatal(err)
	}
	f := openELF(t, path)
	var overlays []*elf.Section
	for _, s := range f.Sections {
		if s.Name == probesName {
			overlays = append(overlays, s)
		}
	}
	if len(overlays) != 1 || overlays[0].Addr != b.table+8 || overlays[0].Size != 4 {
		t.Errorf(".probes sections %v, want one on %#x..%#x", overlays, b.table+8, b.table+12)
	}
	notes, err := sdtnote.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []probe.Probe
	for _, n := range notes {
		got = append(got, probe.Probe{Provider: n.Provider, Name: n.Name, Spec: n.Args, PC: n.PC, Semaphore: n.Semaphore})
	}
	if !reflect.DeepEqual(got, sites) {
		t.Errorf("notes:\n got %+v\nwant %+v", got, sites)
	}
}

func progs(f *elf.File) []elf.ProgHeader {
	var out []elf.ProgHeader
	for _, p := range f.Progs {
		out = append(out, p.ProgHeader)
	}
	return out
}

func TestAddNotesErrors(t *testing.T) {
	v := exeVariant
	b := build(t, v)
	f := openELF(t, b.path)
	addr := func(name string) uint64 {
		s := f.Section(name)
		if s == nil {
			t.Fatalf("no %s section", name)
		}
		return s.Addr
	}
	site := func(pc, sema uint64) []probe.Probe {
		return []probe.Probe{{Provider: "p", Name: "n", Spec: v.args, PC: pc, Semaphore: sema}}
	}
	poke := func(off int, val ...byte) func([]byte) []byte {
		return func(d []byte) []byte { copy(d[off:], val); return d }
	}
	tests := []struct {
		name   string
		mutate func([]byte) []byte // applied to the file before patching
		sites  []probe.Probe
		want   string
	}{
		{"not ELF", func([]byte) []byte { return []byte("#!/bin/sh\necho hi\n") }, site(b.pc, 0), "not an ELF file"},
		{"empty file", func([]byte) []byte { return nil }, site(b.pc, 0), "not an ELF file"},
		{"32-bit", poke(elf.EI_CLASS, byte(elf.ELFCLASS32)), site(b.pc, 0), "32-bit"},
		{"big-endian", poke(elf.EI_DATA, byte(elf.ELFDATA2MSB)), site(b.pc, 0), "big-endian"},
		{"other machine", poke(0x12, byte(elf.EM_RISCV), 0), site(b.pc, 0), "unsupported machine"},
		{"relocatable", poke(0x10, byte(elf.ET_REL), 0), site(b.pc, 0), "unsupported ELF type"},
		{"semaphore in NOBITS", nil, site(b.pc, addr(".noptrbss")), "NOBITS"},
		{"semaphore unaligned", nil, site(b.pc, b.table+9), "not 2-byte aligned"},
		{"semaphore outside sections", nil, site(b.pc, 0x10), "outside every allocated section"},
		{"semaphore read-only", nil, site(b.pc, addr(".rodata")), "not writable"},
		{"semaphores in two sections", nil, append(site(b.pc, b.table+8), site(b.pc, addr(".data"))...), "one .probes section must cover them all"},
		{"pc outside code", nil, site(addr(".rodata"), b.table+8), "not inside an executable section"},
		{"empty name", nil, []probe.Probe{{Provider: "p", PC: b.pc}}, "empty provider or name"},
		{"NUL in args", nil, []probe.Probe{{Provider: "p", Name: "n", Spec: "8@%rdi\x00", PC: b.pc}}, "NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := fresh(t, v)
			if tc.mutate != nil {
				if err := os.WriteFile(path, tc.mutate(readFile(t, path)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			orig := readFile(t, path)
			err := addSites(path, tc.sites)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("AddNotes error = %v, want one naming %s and containing %q", err, path, tc.want)
			}
			if !bytes.Equal(readFile(t, path), orig) {
				t.Error("file changed despite the error")
			}
		})
	}
}

func TestAddNotesNoSites(t *testing.T) {
	tests := []struct {
		name  string
		sites []probe.Probe
	}{{"nil", nil}, {"empty", []probe.Probe{}}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Not even an ELF file: with nothing to add, nothing is read.
			path := filepath.Join(t.TempDir(), "x")
			if err := os.WriteFile(path, []byte("not ELF"), 0o644); err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(path)
			if err := addSites(path, tc.sites); err != nil {
				t.Fatal(err)
			}
			st2, _ := os.Stat(path)
			if string(readFile(t, path)) != "not ELF" || !st2.ModTime().Equal(st.ModTime()) || !os.SameFile(st, st2) {
				t.Error("file touched")
			}
		})
	}
}

// TestAddNotesFileHandling checks that the patch is made in place: mode
// bits kept, a read-only file patched all the same (run as a user other
// than root to see it), a symlink's target patched and the link left
// alone.
func TestAddNotesFileHandling(t *testing.T) {
	tests := []struct {
		name    string
		mode    os.FileMode
		symlink bool
	}{
		{"mode 0755", 0o755, false},
		{"mode 0750", 0o750, false},
		// What the linker writes under umask 0222.
		{"read-only 0555", 0o555, false},
		{"through symlink", 0o711, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, b := fresh(t, exeVariant)
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			target := path
			if tc.symlink {
				path = filepath.Join(t.TempDir(), "link")
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			}
			before, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			if err := addSites(path, b.sites(exeVariant)); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, st) {
				t.Error("file replaced, not patched in place")
			}
			if got := st.Mode() & (os.ModePerm | os.ModeSetuid); got != tc.mode {
				t.Errorf("mode %v, want %v", got, tc.mode)
			}
			if tc.symlink {
				if l, err := os.Lstat(path); err != nil || l.Mode()&os.ModeSymlink == 0 {
					t.Errorf("symlink replaced by a file (%v)", err)
				}
			}
			if notes, err := sdtnote.Read(openELF(t, target)); err != nil || len(notes) != 2 {
				t.Errorf("target has %d notes (%v), want 2", len(notes), err)
			}
		})
	}
}

// TestAddNotesFullDisk checks that a patch that cannot be written leaves
// the executable as the linker wrote it. A file size limit just above its
// length makes the writes fail as a full disk would: in Go's executable
// after the first appended bytes, in ld's after the tail has overwritten
// the section header table ld put at the end.
func TestAddNotesFullDisk(t *testing.T) {
	for _, v := range []variant{exeVariant, cgoVariant} {
		t.Run(v.name, func(t *testing.T) {
			path, b := fresh(t, v)
			orig := readFile(t, path)
			var lim syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
				t.Fatal(err)
			}
			tight := lim
			tight.Cur = uint64(len(orig)) + 16
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &tight); err != nil {
				t.Skipf("cannot limit the file size: %v", err)
			}
			err := addSites(path, b.sites(v))
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(err, syscall.EFBIG) {
				t.Fatalf("AddNotes error = %v, want EFBIG", err)
			}
			if !bytes.Equal(readFile(t, path), orig) {
				t.Error("file changed despite the error")
			}
		})
	}
}

func TestAddStrings(t *testing.T) {
	tests := []struct {
		name     string
		tab      string
		names    []string
		wantTab  string
		wantOffs []uint32
	}{
		{"all new", "\x00.text\x00", []string{".probes", ".x"}, "\x00.text\x00.probes\x00.x\x00", []uint32{7, 15}},
		{"present", "\x00.probes\x00", []string{".probes"}, "\x00.probes\x00", []uint32{1}},
		{"tail shared", "\x00.note.x.probes\x00", []string{".probes"}, "\x00.note.x.probes\x00", []uint32{8}},
		{"unterminated", "\x00.text", []string{".a"}, "\x00.text\x00.a\x00", []uint32{7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, offs := addStrings([]byte(tc.tab), tc.names)
			if string(tab) != tc.wantTab || !reflect.DeepEqual(offs, tc.wantOffs) {
				t.Errorf("addStrings = %q %v, want %q %v", tab, offs, tc.wantTab, tc.wantOffs)
			}
		})
	}
}

// addSites is AddNotes for sites known beforehand.
func addSites(path string, sites []probe.Probe) error {
	if len(sites) == 0 {
		return nil
	}
	_, err := AddNotes(path, func([]byte) ([]probe.Probe, error) { return sites, nil })
	return err
}
