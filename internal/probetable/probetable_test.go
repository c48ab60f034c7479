package probetable

import (
	"encoding/binary"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
	}{
		{"one", []Entry{{"shop", "order__placed", "-8@8(%rsp) 8@16(%rsp)"}}},
		{"no args", []Entry{{"p", "a", ""}, {"p", "b", ""}}},
		{"five", []Entry{{"a", "b", "1@8(%rsp)"}, {"a", "c", ""}, {"a", "d", "8@8(%rsp)"}, {"x", "y", "-2@8(%rsp)"}, {"x", "z", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := Build("example.com/pkg", tt.entries)
			if err != nil {
				t.Fatal(err)
			}
			if img.Layout.Size%8 != 0 || img.Layout.StubsOffset%8 != 0 {
				t.Fatalf("layout not 8-aligned: %+v", img.Layout)
			}
			// What the linker does: fill in stub addresses.
			b := append([]byte(nil), img.Bytes...)
			for i := range tt.entries {
				binary.LittleEndian.PutUint64(b[img.Layout.StubsOffset+8*i:], 0x401000+uint64(i))
			}
			b = append(b, 0xff, 0xff) // whatever follows in the section
			sites, size, err := Decode(b, 0x500000)
			if err != nil {
				t.Fatal(err)
			}
			if size != img.Layout.Size {
				t.Errorf("size %d, want %d", size, img.Layout.Size)
			}
			if len(sites) != len(tt.entries) {
				t.Fatalf("got %d sites, want %d", len(sites), len(tt.entries))
			}
			for i, s := range sites {
				if s.Package != "example.com/pkg" {
					t.Errorf("site %d: package %q", i, s.Package)
				}
				if s.Entry != tt.entries[i] {
					t.Errorf("site %d: %+v, want %+v", i, s.Entry, tt.entries[i])
				}
				if s.Stub != 0x401000+uint64(i) {
					t.Errorf("site %d: stub %#x", i, s.Stub)
				}
				if want := uint64(0x500000 + 24 + 2*i); s.Semaphore != want || s.Semaphore%2 != 0 {
					t.Errorf("site %d: semaphore %#x, want %#x", i, s.Semaphore, want)
				}
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	img, err := Build("", []Entry{{"p", "n", "8@8(%rsp)"}})
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), img.Bytes...)
	corrupt[len(corrupt)-9] ^= 1 // inside the strings: checksum fails
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"no magic", make([]byte, 64)},
		{"truncated", img.Bytes[:30]},
		{"checksum", corrupt},
		{"unrelocated stub", img.Bytes},
	}
	for _, tt := range tests {
		if _, _, err := Decode(tt.b, 0x1000); err == nil {
			t.Errorf("%s: Decode succeeded", tt.name)
		}
	}
}

func TestBuildRejectsNUL(t *testing.T) {
	if _, err := Build("", []Entry{{"p", "a\x00b", ""}}); err == nil {
		t.Fatal("Build accepted a NUL byte")
	}
}
