package values

import (
	"testing"

	"github.com/go-usdt/usdt/internal/layout"
)

// TestPlanBounds: whatever the layouts and the maps' groups, a plan holds at most MaxOps
// copies, each within the value area and at most OpMax bytes, each from
// an argument or a pointer an earlier copy brought in: what the BPF
// program's bounds checks assume.
func TestPlanBounds(t *testing.T) {
	str := &layout.Type{Kind: layout.String, Size: 16}
	node := &layout.Type{Kind: layout.Struct, Size: 24}
	next := &layout.Type{Kind: layout.Pointer, Size: 8, Elem: node}
	node.Fields = []layout.Field{{Name: "S", Type: str}, {Name: "Next", Offset: 16, Type: next}}
	big := &layout.Type{Kind: layout.Array, Size: 8 * 1000, Len: 1000, Elem: &layout.Type{Kind: layout.Pointer, Size: 8, Elem: node}}
	iface := &layout.Type{Kind: layout.Iface, Size: 16}
	slot := &layout.Type{Kind: layout.Struct, Size: 32, Fields: []layout.Field{{Name: "key", Type: str}, {Name: "elem", Offset: 16, Type: str}}}
	strMap := &layout.Type{Kind: layout.Map, Size: 8, Elem: slot}
	maps := &layout.Type{Kind: layout.Struct, Size: 24, Fields: []layout.Field{{Name: "A", Type: strMap}, {Name: "B", Offset: 8, Type: strMap}, {Name: "C", Offset: 16, Type: strMap}}}
	for _, tt := range []struct {
		name string
		ls   []*layout.Type
	}{
		{"list", []*layout.Type{nil, next}},
		{"big array", []*layout.Type{big, big, iface}},
		{"interfaces", []*layout.Type{iface, iface, iface, iface, iface, iface, iface}},
		{"maps", []*layout.Type{strMap, maps, &layout.Type{Kind: layout.Pointer, Size: 8, Elem: maps}}},
	} {
		for _, groups := range []MapGroups{SlotGroups, SplitGroups} {
			p := NewPlan(tt.ls, groups)
			if len(p.Ops) == 0 || len(p.Ops) > MaxOps {
				t.Errorf("%s: %d ops", tt.name, len(p.Ops))
			}
			filled, derived := 0, 0
			for i, op := range p.Ops {
				if op.Max == 0 || op.Max > OpMax || int(op.Dst)+int(op.Max) > AreaSize || op.Dst%8 != 0 {
					t.Errorf("%s: op %d %+v out of bounds", tt.name, i, op)
				}
				switch op.From {
				case FromArg:
					if tt.ls[op.Arg] == nil {
						t.Errorf("%s: op %d reads argument %d, which has no layout", tt.name, i, op.Arg)
					}
				case FromPtr, FromSlice:
					if int(op.Src)+8 > filled {
						t.Errorf("%s: op %d reads a pointer at %d, before any copy brought it", tt.name, i, op.Src)
					}
					// A reader that faults on a bad pointer (the ring's)
					// reads a guess safely: what a guess brought in is
					// one too.
					for j, from := range p.Ops[:i] {
						if from.Guess && op.Src >= from.Dst && int(op.Src) < int(from.Dst)+int(from.Max) {
							derived++
							if !op.Guess {
								t.Errorf("%s: op %d %+v reads a pointer op %d guessed, and is no guess", tt.name, i, op, j)
							}
						}
					}
				default:
					t.Errorf("%s: op %d from %d", tt.name, i, op.From)
				}
				filled = max(filled, int(op.Dst)+int(op.Max))
			}
			if tt.name == "maps" && derived == 0 {
				t.Errorf("maps: no read of a pointer that a group's read brought in")
			}
			for i, l := range tt.ls {
				if _, ok := p.Root(i); ok != (l != nil) {
					t.Errorf("%s: argument %d has a root %v", tt.name, i, ok)
				}
			}
		}
	}
}

// TestHeldPlan: a held plan copies only the arguments the probe holds,
// each its own words, and follows nothing: a pointer or a map argument
// gets no read at all.
func TestHeldPlan(t *testing.T) {
	str := &layout.Type{Kind: layout.String, Size: 16}
	rec := &layout.Type{Kind: layout.Struct, Size: 24, Fields: []layout.Field{{Name: "S", Type: str}, {Name: "P", Offset: 16, Type: &layout.Type{Kind: layout.Pointer, Size: 8, Elem: str}}}}
	ptr := &layout.Type{Kind: layout.Pointer, Size: 8, Elem: rec}
	m := &layout.Type{Kind: layout.Map, Size: 8, Elem: &layout.Type{Kind: layout.Struct, Size: 32, Fields: []layout.Field{{Name: "key", Type: str}, {Name: "elem", Offset: 16, Type: str}}}}
	iface := &layout.Type{Kind: layout.Iface, Size: 16}
	ls := []*layout.Type{rec, ptr, m, iface, str, nil}
	if full := NewPlan(ls, SlotGroups); len(full.Ops) <= 3 {
		t.Fatalf("the full plan has %d reads: these layouts test nothing", len(full.Ops))
	}
	p := HeldPlan(ls, SlotGroups)
	held := map[int]bool{}
	for i, op := range p.Ops {
		if op.From != FromArg || !op.Held {
			t.Errorf("op %d %+v: a read the probe does not hold", i, op)
		}
		held[int(op.Arg)] = true
	}
	for i, want := range []bool{true, false, false, true, true, false} {
		if held[i] != want {
			t.Errorf("argument %d (%v) copied %v, want %v", i, ls[i], held[i], want)
		}
		if _, ok := p.Root(i); ok != want {
			t.Errorf("argument %d has a root %v, want %v", i, ok, want)
		}
	}
}
