package funcsites

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/testing/elftest"
)

// TestFindDamaged asks for the code of functions whose symbols a damaged
// binary could give: one that ends before it begins (its end wraps past
// the last address) and one of a terabyte. Each is an error naming it,
// not a slice the size of the address space.
func TestFindDamaged(t *testing.T) {
	s := &Symbols{f: elftest.Self(t), funcs: map[string][2]uint64{
		"wraps": {1 << 63, 0x2000},
		"huge":  {0x401000, 0x401000 + 1<<40},
	}}
	for name := range s.funcs {
		if _, err := s.Find(name); err == nil || !strings.Contains(err.Error(), name+": ") || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("Find(%s) = %v, want an error saying the binary is damaged", name, err)
		}
	}
}

// FuzzGoTable reads a .gopclntab of any bytes, as the pprof exporter and
// a stripped binary's note-only probes do: a table or an error, never a
// panic, and never more functions than its bytes can hold, whatever its
// header counts (debug/gosym would make room for them all first, which
// exhausted the memory: the seed gopclntab-count-past-its-bytes). The
// seeds are the start of this test's own executable's table, its count
// as the linker wrote it and lowered to what the bytes hold.
func FuzzGoTable(f *testing.F) {
	pcln := elftest.Self(f).Section(".gopclntab")
	if pcln == nil {
		f.Fatal("no .gopclntab in this test's executable")
	}
	data, err := pcln.Data()
	if err != nil {
		f.Fatal(err)
	}
	head := data[:4096]
	f.Add(head)
	lowered := append([]byte(nil), head...)
	binary.LittleEndian.PutUint64(lowered[8:], 16)
	f.Add(lowered)
	f.Fuzz(func(t *testing.T, data []byte) {
		table, err := goTable(data, 0x401000)
		if err != nil {
			return
		}
		if len(table.Funcs) > len(data)/8 {
			t.Errorf("%d functions of a table of %d bytes", len(table.Funcs), len(data))
		}
	})
}

// FuzzFind decodes a function's code of any bytes, as the tracer does for
// the note-only probes of a binary nobody vouches for: sites or an error,
// never a panic, and every site within the code, its returns in order.
// The seeds are real code: a function of this test's own executable for
// amd64, and for arm64 the stack check and return Go's compiler writes
// (as TestFind has them from real builds).
func FuzzFind(f *testing.F) {
	self := elftest.Self(f)
	syms, err := NewSymbols(self)
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"github.com/go-usdt/usdt/internal/funcsites.vexLen", "github.com/go-usdt/usdt/internal/funcsites.Find"} {
		r, ok := syms.funcs[name]
		if !ok {
			f.Fatalf("no symbol %s in this test's executable", name)
		}
		code := make([]byte, r[1]-r[0])
		if _, err := self.Section(".text").ReadAt(code, int64(r[0]-self.Section(".text").Addr)); err != nil {
			f.Fatal(err)
		}
		f.Add("amd64", code)
	}
	arm64 := func(words ...uint32) []byte {
		var b []byte
		for _, w := range words {
			b = binary.LittleEndian.AppendUint32(b, w)
		}
		return b
	}
	// LDR X16, [X28, #16]; CMP SP, X16; B.LS; STP; ...; RET.
	f.Add("arm64", arm64(0xf9400b90, 0xeb3063ff, 0x54000129, 0xa9bf7bfd, 0x910003fd, 0xa8c17bfd, 0xd65f03c0))
	const addr = 0x401000
	f.Fuzz(func(t *testing.T, arch string, code []byte) {
		s, err := Find(arch, addr, code)
		if err != nil {
			return
		}
		if s.Entry < addr || s.Entry > addr+uint64(len(code)) {
			t.Errorf("entry at %#x, outside the code at %#x, %d bytes", s.Entry, addr, len(code))
		}
		for i, r := range s.Returns {
			if r < addr || r >= addr+uint64(len(code)) || i > 0 && r <= s.Returns[i-1] {
				t.Errorf("returns %#x, outside the code at %#x, %d bytes, or out of order", s.Returns, addr, len(code))
				break
			}
		}
	})
}
