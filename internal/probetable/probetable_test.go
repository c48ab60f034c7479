package probetable

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

// link does what the linker does to an image: fills in stub addresses. It
// appends bytes that follow the table in the section.
func link(img Image) []byte {
	b := append([]byte(nil), img.Bytes...)
	for i := range img.Layout.Count {
		binary.LittleEndian.PutUint64(b[img.Layout.StubsOffset+8*i:], 0x401000+uint64(i))
	}
	return append(b, 0xff, 0xff) // whatever follows in the section
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
		slots   int // semaphore slots, unrounded
	}{
		{"empty", nil, 0},
		{"one", []Entry{{"shop", "order__placed", "-8@8(%rsp) 8@16(%rsp)", 0, []probe.Kind{probe.Int64, probe.String}}}, 1},
		{"no args", []Entry{{"p", "a", "", 0, nil}, {"p", "b", "", 1, nil}}, 2},
		{"five", []Entry{{"a", "b", "1@8(%rsp)", 0, []probe.Kind{probe.Bool}}, {"a", "c", "", 1, nil}, {"a", "d", "8@8(%rsp)", 2, nil}, {"x", "y", "-2@8(%rsp)", 3, []probe.Kind{probe.Int16}}, {"x", "z", "", 4, nil}}, 5},
		{"shared", []Entry{{"go", "entry__f", "-8@8(%rsp)", 0, nil}, {"go", "exit__f", "-8@8(%rsp)", 0, nil}, {"go", "entry__g", "", 1, nil}}, 2},
		{"exit first", []Entry{{"go", "exit__f", "", 1, nil}, {"go", "entry__f", "", 1, nil}}, 2},
		{"sparse", []Entry{{"p", "a", "", 6, nil}}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := Build("example.com/pkg", tt.entries)
			if err != nil {
				t.Fatal(err)
			}
			l := img.Layout
			if l.Size%8 != 0 || l.StubsOffset%8 != 0 || l.SlotsOffset%8 != 0 || l.StringsOffset%8 != 0 {
				t.Fatalf("layout not 8-aligned: %+v", l)
			}
			if want := (tt.slots + 3) &^ 3; l.SemaphoreSlots != want {
				t.Errorf("%d semaphore slots, want %d", l.SemaphoreSlots, want)
			}
			if got := binary.LittleEndian.Uint32(img.Bytes[20:]); got != uint32(tt.slots) {
				t.Errorf("header says %d slots, want %d", got, tt.slots)
			}
			if l.StubsOffset != l.SemaphoreOffset(l.SemaphoreSlots) || l.SlotsOffset != l.StubsOffset+8*len(tt.entries) || l.Count != len(tt.entries) {
				t.Errorf("inconsistent layout %+v", l)
			}
			if 24+2*l.SemaphoreSlots+8*l.TailWords() != l.Size {
				t.Errorf("header, semaphores and tail words do not make up the table: %+v", l)
			}
			for off := 24; off < l.StubsOffset; off++ {
				if img.Bytes[off] != 0 {
					t.Fatalf("semaphore byte at %d is %#x, want 0", off, img.Bytes[off])
				}
			}
			sites, size, err := Decode(link(img), 0x500000)
			if err != nil {
				t.Fatal(err)
			}
			if size != l.Size {
				t.Errorf("size %d, want %d", size, l.Size)
			}
			if len(sites) != len(tt.entries) {
				t.Fatalf("got %d sites, want %d", len(sites), len(tt.entries))
			}
			for i, s := range sites {
				if s.Package != "example.com/pkg" {
					t.Errorf("site %d: package %q", i, s.Package)
				}
				if !reflect.DeepEqual(s.Entry, tt.entries[i]) {
					t.Errorf("site %d: %+v, want %+v", i, s.Entry, tt.entries[i])
				}
				if s.Stub != 0x401000+uint64(i) {
					t.Errorf("site %d: stub %#x", i, s.Stub)
				}
				if want := uint64(0x500000 + 24 + 2*tt.entries[i].Semaphore); s.Semaphore != want || s.Semaphore%2 != 0 {
					t.Errorf("site %d: semaphore %#x, want %#x", i, s.Semaphore, want)
				}
			}
		})
	}
}

// TestSharedSemaphore checks the case the format exists for: sites with one
// slot share a semaphore address, and only they do.
func TestSharedSemaphore(t *testing.T) {
	img, err := Build("example.com/pkg", []Entry{{"go", "entry__f", "", 0, nil}, {"go", "exit__f", "", 0, nil}, {"go", "entry__g", "", 1, nil}})
	if err != nil {
		t.Fatal(err)
	}
	sites, _, err := Decode(link(img), 0x500000)
	if err != nil {
		t.Fatal(err)
	}
	if sites[0].Semaphore != sites[1].Semaphore {
		t.Errorf("entry and exit of f have semaphores %#x and %#x, want one", sites[0].Semaphore, sites[1].Semaphore)
	}
	if sites[2].Semaphore == sites[0].Semaphore {
		t.Errorf("g shares f's semaphore %#x", sites[0].Semaphore)
	}
}

func TestDecodeRejects(t *testing.T) {
	img, err := Build("", []Entry{{"p", "n", "8@8(%rsp)", 0, nil}, {"p", "m", "", 1, nil}})
	if err != nil {
		t.Fatal(err)
	}
	l := img.Layout
	linked := link(img)
	with := func(f func(b []byte)) []byte {
		b := append([]byte(nil), linked...)
		f(b)
		return b
	}
	// resum recomputes the checksum, so only the check under test fails.
	resum := func(b []byte) {
		binary.LittleEndian.PutUint32(b[16:], checksum(b[l.SlotsOffset:l.Size]))
	}
	tests := []struct {
		name string
		b    []byte
		err  error // nil: any error
	}{
		{"empty", nil, ErrNotTable},
		{"no magic", make([]byte, 64), ErrNotTable},
		{"old magic", with(func(b []byte) { b[7] = 0x01 }), ErrNotTable},
		{"truncated", linked[:30], ErrNotTable},
		{"cut before the end", linked[:l.Size-8], ErrNotTable},
		{"strings checksum", with(func(b []byte) { b[l.Size-9] ^= 1 }), ErrNotTable},
		{"slot array checksum", with(func(b []byte) { b[l.SlotsOffset] ^= 1 }), ErrNotTable},
		{"slot padding checksum", with(func(b []byte) { b[l.SlotsOffset+5] = 1 }), ErrNotTable},
		{"slot out of range", with(func(b []byte) {
			binary.LittleEndian.PutUint16(b[l.SlotsOffset+2:], 2)
			resum(b)
		}), ErrNotTable},
		{"no slots", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[20:], 0)
			resum(b)
		}), ErrNotTable},
		{"too many slots", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[20:], 1<<16+1)
			resum(b)
		}), ErrNotTable},
		{"size not a multiple of 8", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[12:], uint32(l.Size-1))
		}), ErrNotTable},
		{"size inside the slot array", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[12:], uint32(l.SlotsOffset))
		}), ErrNotTable},
		{"strings run short", with(func(b []byte) {
			for i := l.StringsOffset; i < l.Size; i++ {
				b[i] = 'x'
			}
			resum(b)
		}), ErrNotTable},
		{"unrelocated stub", img.Bytes, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode(tt.b, 0x1000)
			switch {
			case err == nil:
				t.Fatal("Decode succeeded")
			case tt.err != nil && !errors.Is(err, tt.err):
				t.Fatalf("Decode: %v, want %v", err, tt.err)
			case tt.err == nil && errors.Is(err, ErrNotTable):
				t.Fatalf("Decode: %v, want a real error", err)
			}
		})
	}
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
	}{
		{"NUL byte", []Entry{{"p", "a\x00b", "", 0, nil}}},
		{"negative slot", []Entry{{"p", "a", "", 0, nil}, {"p", "b", "", -1, nil}}},
		{"slot too large", []Entry{{"p", "a", "", 1 << 16, nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Build("", tt.entries); err == nil {
				t.Fatal("Build succeeded")
			}
		})
	}
	if _, err := Build("", []Entry{{"p", "a", "", 1<<16 - 1, nil}}); err != nil {
		t.Errorf("the highest slot: %v", err)
	}
}

// TestDecodeWithoutKinds reads a table as usdtgen wrote them before kinds
// existed: the strings end after the args.
func TestDecodeWithoutKinds(t *testing.T) {
	entries := []Entry{{"p", "a", "-8@8(%rsp)", 0, []probe.Kind{probe.Int64}}, {"p", "b", "", 1, nil}}
	img, err := Build("", entries)
	if err != nil {
		t.Fatal(err)
	}
	b := link(img)
	l := img.Layout
	old := "\x00p\x00a\x00-8@8(%rsp)\x00p\x00b\x00\x00"
	old += string(make([]byte, pad8(len(old))-len(old)))
	b = append(b[:l.StringsOffset:l.StringsOffset], old...)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
	binary.LittleEndian.PutUint32(b[16:], checksum(b[l.SlotsOffset:]))
	sites, _, err := Decode(b, 0x500000)
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) != 2 || sites[0].Args != "-8@8(%rsp)" || sites[0].Kinds != nil || sites[1].Kinds != nil {
		t.Errorf("got %+v, want the two probes without kinds", sites)
	}
}
