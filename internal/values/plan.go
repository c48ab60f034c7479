// Package values reads Go values out of a traced process's memory, as a
// probe table's layouts (internal/layout) describe them, and writes them
// as Go's %+v and as JSON.
//
// The reading happens in the kernel, when the probe fires: a Plan is a
// short list of copies (Op) the tracer's BPF program makes into its
// event, each from an argument's address or from a pointer an earlier
// copy brought in, within a byte budget. Decode then turns the event's
// bytes back into values.
package values

import (
	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/valueop"
)

// From says where an Op reads (valueop, which the probes' writer knows).
type From = valueop.From

const (
	FromNone  = valueop.FromNone
	FromArg   = valueop.FromArg   // the address the argument holds
	FromPtr   = valueop.FromPtr   // the pointer at Src in the value area
	FromSlice = valueop.FromSlice // the pointer at Src, Max bytes at most but the length at Src+8 times Elem
)

// Op is one copy into the event's value area.
type Op struct {
	From     From
	Arg      uint8  // FromArg: the argument's index in the note
	Src      uint16 // FromPtr, FromSlice: offset of the pointer in the value area
	Dst, Max uint16 // where the bytes go and how many at most
	Elem     uint16 // FromSlice: bytes per element
	Dynamic  bool   // the bytes of an interface's data, whose type is known only when decoding
	// Guess says the read may miss: its source is a guess (what an
	// interface's data may hold), or its bytes may run past the object
	// (an interface's data, a map's directory read as a group). Only
	// when it reads nothing is it failed (see Failed).
	Guess bool
	// Held says the source is a variable the probe itself holds (the
	// address of an argument's copy, which the rewritten code takes),
	// so a plain load cannot fault. Every other read goes through
	// memory the probed function may never touch (a pointer, a
	// string's or slice's bytes, a map, an interface's data) and may
	// fault even in a correct program: memory it unmapped, freed C
	// memory, a header torn by a data race. A reader that can fault
	// reads those so that it cannot, and marks them failed.
	Held bool
}

// Limits of a plan, which the BPF program is built for.
const (
	MaxOps   = valueop.MaxOps
	AreaSize = valueop.AreaSize // the value area's bytes
	OpMax    = 512              // bytes one Op copies at most
	// StatusSize is the bytes at the start of the value area that say
	// which reads failed: bit j of its first 32-bit word is set when
	// Ops[j] could not read what it should (see Failed). The reads'
	// bytes follow it.
	StatusSize = 8
	// Shown at most: a string's bytes, a slice's or an array's elements.
	StringMax = 64
	ElemsMax  = 16
	// DynamicSize is what an interface's data is read as: enough for
	// the errors of errors.New, fmt.Errorf's %w and *fs.PathError.
	DynamicSize = 48
)

// Plan is the copies a site's event needs, and for each argument that
// has a value to read, the copy that brings its root.
type Plan struct {
	Ops []Op
	// roots[i] is the op of argument i plus one, 0 for none.
	roots map[int]int
	// follow maps a pointer's or a string's offset in the value area to
	// the op that read what it points to.
	follow map[uint16]int
	// groups is how the binary's maps keep their entries, which the
	// decoder needs as the plan did.
	groups MapGroups
}

// NewPlan plans the reads of a site whose argument i has the layout
// ls[i] (nil for none), in a binary whose maps keep their entries in
// groups.
func NewPlan(ls []*layout.Type, groups MapGroups) *Plan { return newPlan(ls, groups, false) }

// HeldPlan plans only the copies of the arguments the probe holds
// (Op.Held): each argument's own words, which no read can fault on,
// and nothing they point to. A pointer or a map argument gets no read,
// and decodes as its address; a string, a slice or an interface as its
// header (a nil interface as nil).
func HeldPlan(ls []*layout.Type, groups MapGroups) *Plan { return newPlan(ls, groups, true) }

func newPlan(ls []*layout.Type, groups MapGroups, heldOnly bool) *Plan {
	p := &Plan{roots: map[int]int{}, follow: map[uint16]int{}, groups: groups}
	used := StatusSize
	type item struct {
		t   *layout.Type
		dst int
		// header says t is a map and dst its header.
		header bool
	}
	var queue []item
	add := func(op Op) (int, bool) {
		if len(p.Ops) == MaxOps || op.Max == 0 || used+int(op.Max) > AreaSize {
			return 0, false
		}
		// A pointer that a guessed read brought in is a guess too: a
		// map's directory read as a group holds table pointers where
		// the group's keys and elements would be.
		if op.From != FromArg {
			for _, o := range p.Ops {
				if o.Guess && op.Src >= o.Dst && int(op.Src) < int(o.Dst)+int(o.Max) {
					op.Guess = true
					break
				}
			}
		}
		op.Dst = uint16(used)
		used += (int(op.Max) + 7) &^ 7
		p.Ops = append(p.Ops, op)
		return len(p.Ops) - 1, true
	}
	size := func(t *layout.Type) uint16 { return uint16(min(t.Size, OpMax)) }
	for i, l := range ls {
		if l == nil {
			continue
		}
		root, n := l, size(l)
		switch l.Kind {
		case layout.Pointer:
			if l.Elem == nil {
				continue
			}
			root, n = l.Elem, size(l.Elem)
		case layout.Map:
			n = mapHeader
		}
		// A pointer or a map argument is the pointer itself; any other
		// is the address of the argument's copy.
		held := l.Kind != layout.Pointer && l.Kind != layout.Map
		if heldOnly && !held {
			continue
		}
		if j, ok := add(Op{From: FromArg, Arg: uint8(i), Max: n, Held: held}); ok {
			p.roots[i] = j + 1
			queue = append(queue, item{root, int(p.Ops[j].Dst), l.Kind == layout.Map})
		}
	}
	if heldOnly {
		return p
	}
	// Breadth first, so that what lies nearer the argument is read
	// first, but a pointer is followed only once everything else the
	// reads so far reached is: the strings of a struct, whose fields
	// point at large structs that are often nil, come before those.
	// So are a slice's elements, which are often none.
	var later []func()
	for len(queue) > 0 || len(later) > 0 {
		if len(queue) == 0 {
			later[0]()
			later = later[1:]
			continue
		}
		it := queue[0]
		queue = queue[1:]
		t, dst := it.t, it.dst
		follow := func(op Op, then *layout.Type) (int, bool) {
			op.Src = uint16(dst)
			j, ok := add(op)
			if !ok {
				return 0, false
			}
			p.follow[uint16(dst)] = j
			if then != nil {
				queue = append(queue, item{t: then, dst: int(p.Ops[j].Dst)})
			}
			return int(p.Ops[j].Dst), true
		}
		if it.header {
			// The group, whatever dirLen says: the decoder knows whether
			// it is one. Like a slice's elements, after what is nearer.
			gr, ok := groups.group(t.Elem)
			if !ok {
				continue
			}
			op := Op{From: FromPtr, Src: uint16(dst + mapDirPtr), Max: uint16(min(gr.size, OpMax)), Guess: true}
			later = append(later, func() {
				if j, ok := add(op); ok {
					p.follow[op.Src] = j
					for k := range groupSlots {
						if key, elem, ok := gr.slot(k, int(op.Max)); ok {
							at := int(p.Ops[j].Dst)
							queue = append(queue, item{t: gr.key, dst: at + key}, item{t: gr.elem, dst: at + elem})
						}
					}
				}
			})
			continue
		}
		switch t.Kind {
		case layout.Struct:
			for _, f := range t.Fields {
				// A field without a type, which no layout this tracer
				// reads should have, decodes as unknown.
				if f.Type != nil && f.Offset+f.Type.Size <= OpMax {
					queue = append(queue, item{t: f.Type, dst: dst + int(f.Offset)})
				}
			}
		case layout.Array:
			if t.Elem == nil {
				break
			}
			for k := int64(0); k < min(t.Len, ElemsMax) && (k+1)*t.Elem.Size <= OpMax; k++ {
				queue = append(queue, item{t: t.Elem, dst: dst + int(k*t.Elem.Size)})
			}
		case layout.String:
			follow(Op{From: FromSlice, Max: StringMax, Elem: 1}, nil)
		case layout.Slice:
			if t.Elem == nil || t.Elem.Size == 0 {
				break
			}
			n := min(ElemsMax*t.Elem.Size, OpMax)
			if byteSlice(t) {
				n = StringMax
			}
			op := Op{From: FromSlice, Src: uint16(dst), Max: uint16(n - n%t.Elem.Size), Elem: uint16(t.Elem.Size)}
			later = append(later, func() {
				if j, ok := add(op); ok {
					p.follow[op.Src] = j
					for k := int64(0); k < int64(op.Max)/t.Elem.Size; k++ {
						queue = append(queue, item{t: t.Elem, dst: int(p.Ops[j].Dst) + int(k*t.Elem.Size)})
					}
				}
			})
		case layout.Pointer:
			if t.Elem != nil && t.Elem.Size > 0 {
				op := Op{From: FromPtr, Src: uint16(dst), Max: size(t.Elem)}
				later = append(later, func() {
					if j, ok := add(op); ok {
						p.follow[op.Src] = j
						queue = append(queue, item{t: t.Elem, dst: int(p.Ops[j].Dst)})
					}
				})
			}
		case layout.Map:
			if at, ok := follow(Op{From: FromPtr, Max: mapHeader}, nil); ok {
				queue = append(queue, item{t: t, dst: at, header: true})
			}
		case layout.Iface, layout.Eface:
			if t.Kind == layout.Iface {
				// The itab, whose second word is the type.
				follow(Op{From: FromPtr, Max: 16}, nil)
			}
			dst += 8
			data := errorData
			if t.Name != "error" {
				data = anyData
			}
			follow(Op{From: FromPtr, Max: DynamicSize, Dynamic: true, Guess: true}, data)
		}
		if t == errorData || t == anyData {
			// Guesses at what the data may hold, checked when decoding
			// against its type: a string at 0 (a string's bytes, the
			// messages of errors.New and fmt.Errorf's %w), and for an
			// error, *fs.PathError's Path at 16 and its Err's errno at 40.
			follow(Op{From: FromSlice, Max: StringMax, Elem: 1, Guess: true}, nil)
		}
		if t == errorData {
			dst += 16
			follow(Op{From: FromSlice, Max: StringMax, Elem: 1, Guess: true}, nil)
			dst += 24
			follow(Op{From: FromPtr, Max: 8, Guess: true}, nil)
		}
	}
	return p
}

// errorData and anyData stand for an error's and another interface's
// data, read before its type is known.
var (
	errorData = &layout.Type{Kind: layout.Struct, Size: DynamicSize}
	anyData   = &layout.Type{Kind: layout.Struct, Size: DynamicSize}
)

// Root returns the op that reads argument i's value, if any.
func (p *Plan) Root(i int) (Op, bool) {
	j := p.roots[i]
	if j == 0 {
		return Op{}, false
	}
	return p.Ops[j-1], true
}
