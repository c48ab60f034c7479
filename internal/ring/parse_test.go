package ring

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/ringlayout"
	"github.com/go-usdt/usdt/internal/values"
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
	header := func(count int, strs uint64) uint64 {
		return site | uint64(count)<<ringlayout.CountShift | strs<<ringlayout.StringsShift
	}
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

// TestFlushes: a read whose source lies in the bytes of a read gathered
// since the last flush is marked to flush the batch first; a held read is
// never gathered, so what it brings needs no flush.
func TestFlushes(t *testing.T) {
	str := &layout.Type{Kind: layout.String, Size: 16}
	rec := &layout.Type{Kind: layout.Struct, Size: 24, Fields: []layout.Field{
		{Name: "s", Offset: 0, Type: str}, {Name: "next", Offset: 16, Type: &layout.Type{Kind: layout.Pointer, Size: 8, Elem: &layout.Type{Kind: layout.Struct, Size: 16, Fields: []layout.Field{{Name: "t", Offset: 0, Type: str}}}}},
	}}
	ptr := &layout.Type{Kind: layout.Pointer, Size: 8, Elem: rec}
	// A struct by its copy (held), then a pointer to one (gathered): the
	// held one's string is gathered at once, the pointed-to one's string
	// and pointer wait for it, and what that pointer brings waits again.
	p := values.NewPlan([]*layout.Type{rec, ptr}, values.SlotGroups)
	got := flushes(p.Ops)
	var desc []string
	for i, op := range p.Ops {
		desc = append(desc, fmt.Sprintf("%d:from=%d src=%d dst=%d held=%v flush=%v", i, op.From, op.Src, op.Dst, op.Held, got[i]))
	}
	// Every read's source must be read before it: in a held read, or in
	// a gathered one before the last flush at or before it.
	flushedTo := 0 // reads before this index are read
	for i, op := range p.Ops {
		if got[i] {
			flushedTo = i
		}
		if op.From != values.FromPtr && op.From != values.FromSlice {
			continue
		}
		for j := range i {
			src := p.Ops[j]
			if int(op.Src) < int(src.Dst)+int(src.Max) && int(op.Src)+8 > int(src.Dst) && !src.Held && j >= flushedTo {
				t.Errorf("read %d takes its source from read %d, still gathered:\n%s", i, j, strings.Join(desc, "\n"))
			}
		}
	}
	// And no flush that nothing needs: the held struct's string and the
	// pointer argument share a batch.
	if got[0] || got[1] || got[2] {
		t.Errorf("a flush before the first batch is read:\n%s", strings.Join(desc, "\n"))
	}
	var n int
	for _, f := range got {
		if f {
			n++
		}
	}
	// Before the pointed-to struct's string (its pointer read in the
	// first batch), and before each string a followed pointer brings.
	if n != 3 {
		t.Errorf("%d flushes, want 3:\n%s", n, strings.Join(desc, "\n"))
	}
}

// TestParseCompact: a compact record (CompactBit in its thread word) is
// its header and its one word, with no value area even where its site's
// events have one.
func TestParseCompact(t *testing.T) {
	const site = 0x4a1660
	word := uint64(1500) | 1<<ringlayout.CompactError | 1<<ringlayout.CompactFailed
	buf := words(site|1<<ringlayout.CountShift, 7, 100, 55|1<<ringlayout.CompactBit, word, 0xdead)
	var rec Record
	size, ok := parse(buf, &rec, map[uint64]int{site: 16})
	if !ok || size != 40 {
		t.Fatalf("parse = %d, %v; want 40, true", size, ok)
	}
	if !rec.Compact || rec.Area != nil || rec.Thread != 55 || !slices.Equal(rec.Words, []uint64{word}) {
		t.Errorf("compact %v, area %x, thread %d, words %x; want a compact record of thread 55 with no area and the word %x", rec.Compact, rec.Area, rec.Thread, rec.Words, word)
	}
	// The same record, not compact, has its area.
	buf = words(site|1<<ringlayout.CountShift, 7, 100, 55, word, 5, 6)
	if size, ok := parse(buf, &rec, map[uint64]int{site: 16}); !ok || size != 56 || rec.Compact || len(rec.Area) != 16 {
		t.Errorf("parse of the record with an area = %d, %v, compact %v, area %x", size, ok, rec.Compact, rec.Area)
	}
}
