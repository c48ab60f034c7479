// Package elftest makes ELF executables in memory, for the tests of the
// readers of a binary's bytes: the smallest file debug/elf opens, whose
// headers a test may make say what a damaged binary's do; and opens the
// test's own, a real Go one.
package elftest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"testing"
)

// Load returns an x86-64 executable whose one loaded segment, of flags,
// holds data at vaddr, and nothing else. Its program header says the
// segment has filesz bytes in the file: len(data) for a sound file, more
// for a damaged one.
func Load(data []byte, vaddr, filesz uint64, flags elf.ProgFlag) []byte {
	const ehsize, phsize = 64, 56
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, elf.Header64{
		Ident:     [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Phoff:     ehsize,
		Ehsize:    ehsize,
		Phentsize: phsize,
		Phnum:     1,
	})
	binary.Write(&out, binary.LittleEndian, elf.Prog64{
		Type: uint32(elf.PT_LOAD), Flags: uint32(flags), Off: ehsize + phsize,
		Vaddr: vaddr, Paddr: vaddr, Filesz: filesz, Memsz: filesz, Align: 8,
	})
	out.Write(data)
	return out.Bytes()
}

// Self opens the running test's own executable, a real Go one, closed
// when the test ends.
func Self(tb testing.TB) *elf.File {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}
