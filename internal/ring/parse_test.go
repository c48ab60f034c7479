package ring

import (
	"encoding/binary"
	"slices"
	"testing"
)

// words lays words out as a record's bytes, and str a C string's length
// word and bytes, padded to whole words, as the writer writes them.
func words(w ...uint64) []byte {
	b := make([]byte, 8*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

func str(s string) []byte {
	b := words(uint64(len(s)))
	return append(b, append([]byte(s), make([]byte, (8-len(s)%8)%8)...)...)
}

func TestParse(t *testing.T) {
	const site = 0x4a1660
	header := func(count int, strs uint64) uint64 { return site | uint64(count)<<CountShift | strs<<StringsShift }
	tests := []struct {
		name    string
		buf     []byte
		size    int
		ok      bool
		words   []uint64
		strings []string // "" for a word that is not a string
		area    []uint64 // with an area of len(area) words
	}{
		{"no words", words(header(0, 0), 7, 100, 55), 32, true, nil, nil, nil},
		{"two words", words(header(2, 0), 7, 100, 55, 3, 4), 48, true, []uint64{3, 4}, []string{"", ""}, nil},
		{"a string", append(words(header(2, 0b10), 7, 100, 55, 3, 0xc000), str("key31")...), 48 + 16, true, []uint64{3, 0xc000}, []string{"", "key31"}, nil},
		{"two strings, one of 8 bytes", append(append(words(header(2, 0b11), 7, 100, 55, 0xa, 0xb), str("12345678")...), str("")...), 48 + 16 + 8, true, []uint64{0xa, 0xb}, []string{"12345678", ""}, nil},
		{"cut in its words", words(header(3, 0), 7, 100, 55, 1), 0, false, nil, nil, nil},
		{"cut in a string", append(words(header(1, 1), 7, 100, 55, 0xa), words(20, 0)...), 0, false, nil, nil, nil},
		{"a length past the end", append(words(header(1, 1), 7, 100, 55, 0xa), words(1<<62)...), 0, false, nil, nil, nil},
		{"shorter than a header", words(header(0, 0), 7), 0, false, nil, nil, nil},
		{"a value area", words(header(1, 0), 7, 100, 55, 0xc000, 5, 6), 56, true, []uint64{0xc000}, []string{""}, []uint64{5, 6}},
		{"a string and a value area", append(append(words(header(1, 1), 7, 100, 55, 0xc000), str("ab")...), words(5)...), 64, true, []uint64{0xc000}, []string{"ab"}, []uint64{5}},
		{"cut in its value area", words(header(1, 0), 7, 100, 55, 0xc000, 5), 0, false, nil, nil, []uint64{5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec Record
			var areas map[uint64]int
			if tt.area != nil {
				areas = map[uint64]int{site: 8 * len(tt.area)}
			}
			size, ok := parse(tt.buf, &rec, areas)
			if ok != tt.ok || size != tt.size {
				t.Fatalf("parse = %d, %v; want %d, %v", size, ok, tt.size, tt.ok)
			}
			if !ok {
				return
			}
			if rec.Site != site || rec.Goroutine != 7 || rec.Time != 100 || rec.Thread != 55 {
				t.Errorf("site %#x, goroutine %d, time %d, thread %d", rec.Site, rec.Goroutine, rec.Time, rec.Thread)
			}
			if !slices.Equal(rec.Words, tt.words) {
				t.Errorf("words %v, want %v", rec.Words, tt.words)
			}
			if want := words(tt.area...); len(tt.area) > 0 && string(rec.Area) != string(want) || len(tt.area) == 0 && rec.Area != nil {
				t.Errorf("area %x, want %x", rec.Area, want)
			}
			for i, s := range tt.strings {
				if got := rec.Strings[i]; string(got) != s {
					t.Errorf("string %d = %q, want %q", i, got, s)
				}
			}
		})
	}
}
