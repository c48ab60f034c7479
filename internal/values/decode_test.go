package values

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/go-usdt/usdt/internal/layout"
)

// TestDecodeOddLayouts: a layout read from a type descriptor at the
// address an interface's changing memory gave, or from a damaged probe
// table, can say anything. Its values decode as unknown ("?") or unread
// ("..."), never a panic. FuzzRecord in internal/trace found each.
func TestDecodeOddLayouts(t *testing.T) {
	field := func(off int64, ft *layout.Type) *layout.Type {
		return &layout.Type{Kind: layout.Struct, Size: off + 8, Fields: []layout.Field{{Name: "a", Offset: off, Type: ft}}}
	}
	tests := []struct {
		name string
		l    *layout.Type
		want string
	}{
		{"bool of no bytes", field(0, &layout.Type{Kind: layout.Bool}), "{a:?}"},
		{"int of 16 bytes", &layout.Type{Kind: layout.Int, Size: 16}, "?"},
		{"uint of 3 bytes", &layout.Type{Kind: layout.Uint, Size: 3}, "?"},
		{"float of 2 bytes", &layout.Type{Kind: layout.Float, Size: 2}, "?"},
		{"size past the area", field(8, &layout.Type{Kind: layout.String, Size: math.MaxInt64}), "{a:...}"},
		{"field without a type", field(0, nil), "{a:?}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlan([]*layout.Type{tt.l}, SlotGroups)
			v, ok := p.Decode(0, tt.l, 0xc000010000, make([]byte, AreaSize+OpMax), nil)
			if !ok {
				t.Fatal("the plan reads nothing of the argument")
			}
			if got := v.String(); got != tt.want {
				t.Errorf("%s, want %s", got, tt.want)
			}
		})
	}
}

// TestDecodeFailed: a read the writer marked failed in the area's status
// word shows as unreadable at its address, never as the zeros its bytes
// hold; the reads beside it show as read.
func TestDecodeFailed(t *testing.T) {
	str := &layout.Type{Kind: layout.String, Size: 16}
	bytes := &layout.Type{Kind: layout.Slice, Size: 24, Elem: &layout.Type{Kind: layout.Uint, Size: 1}}
	ints := &layout.Type{Kind: layout.Slice, Size: 24, Elem: &layout.Type{Kind: layout.Int, Size: 8}}
	rec := &layout.Type{Kind: layout.Struct, Size: 64, Fields: []layout.Field{
		{Name: "s", Offset: 0, Type: str}, {Name: "b", Offset: 16, Type: bytes}, {Name: "n", Offset: 40, Type: ints},
	}}
	ptr := &layout.Type{Kind: layout.Pointer, Size: 8, Elem: rec}
	const (
		recAt = 0x7f0000001000
		sAt   = 0x7f0000002000
		bAt   = 0x7f0000003000
		nAt   = 0x7f0000004000
		// nilData, for the string's pointer, asks for the slices'
		// pointers nil instead.
		nilData = 1
	)
	p := NewPlan([]*layout.Type{ptr}, SlotGroups)
	// The ops: the struct, then its string's, its []byte's and its
	// []int's bytes, in that order.
	if len(p.Ops) != 4 {
		t.Fatalf("%d ops, want 4: %+v", len(p.Ops), p.Ops)
	}
	if p.Ops[0].Held {
		t.Errorf("a pointer argument's read is held: %+v", p.Ops[0])
	}
	area := func(failed uint32, s uint64) []byte {
		a := make([]byte, AreaSize)
		binary.LittleEndian.PutUint32(a, failed)
		if failed&1 != 0 {
			return a // the struct's bytes are zeros
		}
		r := a[p.Ops[0].Dst:]
		binary.LittleEndian.PutUint64(r[0:], s)
		binary.LittleEndian.PutUint64(r[8:], 3)
		if s == nilData {
			// The slices' pointers nil, their lengths not.
			s = sAt
			binary.LittleEndian.PutUint64(r[0:], s)
			binary.LittleEndian.PutUint64(r[24:], 2)
			binary.LittleEndian.PutUint64(r[48:], 1)
			copy(a[p.Ops[1].Dst:], "abc")
			return a
		}
		binary.LittleEndian.PutUint64(r[16:], bAt)
		binary.LittleEndian.PutUint64(r[24:], 2)
		binary.LittleEndian.PutUint64(r[40:], nAt)
		binary.LittleEndian.PutUint64(r[48:], 1)
		if s != 0 {
			copy(a[p.Ops[1].Dst:], "abc")
		}
		copy(a[p.Ops[2].Dst:], "xy")
		binary.LittleEndian.PutUint64(a[p.Ops[3].Dst:], 42)
		return a
	}
	tests := []struct {
		failed uint32
		s      uint64 // the string's data pointer
		want   string
	}{
		{0, sAt, `&{s:abc b:xy n:[42]}`},
		{1, sAt, `<unreadable 0x7f0000001000>`},
		{1 << 1, sAt, `&{s:<unreadable 0x7f0000002000> b:xy n:[42]}`},
		{1 << 2, sAt, `&{s:abc b:<unreadable 0x7f0000003000> n:[42]}`},
		{1 << 3, sAt, `&{s:abc b:xy n:<unreadable 0x7f0000004000>}`},
		// A header a data race tore, a nil pointer with a length: the
		// writer reads nothing at nil, and sets no bit.
		{0, 0, `&{s:<unreadable 0x0> b:xy n:[42]}`},
		{0, nilData, `&{s:abc b:<unreadable 0x0> n:<unreadable 0x0>}`},
	}
	for _, tt := range tests {
		v, ok := p.Decode(0, ptr, recAt, area(tt.failed, tt.s), nil)
		if !ok {
			t.Fatal("the plan reads nothing of the argument")
		}
		if got := v.String(); got != tt.want {
			t.Errorf("failed %#b: %s, want %s", tt.failed, got, tt.want)
		}
	}
	// Held: an argument passed by its copy's address.
	if q := NewPlan([]*layout.Type{rec}, SlotGroups); !q.Ops[0].Held || q.Ops[1].Held {
		t.Errorf("a struct argument's read is held, its string's not: %+v", q.Ops)
	}
	// JSON says so in an object of its own.
	v, _ := p.Decode(0, ptr, recAt, area(1, sAt), nil)
	if got, err := AppendJSONData(nil, v.JSON()); err != nil || string(got) != `{"unreadable":"0x7f0000001000"}` {
		t.Errorf("JSON %s (%v)", got, err)
	}
}
