package values

import (
	"cmp"
	"go/version"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/internal/layout"
)

// MapGroups is how a binary's maps keep their entries. A map is a
// pointer to the runtime's header (internal/runtime/maps.Map: used,
// seed, dirPtr, dirLen, ...); a map that has held 8 entries at most has
// dirLen 0 and keeps them in one group at dirPtr: a control word, a byte
// per slot (a full slot's has its high bit clear), then the keys and
// elems. A larger map's dirPtr is a directory of tables, which a trace
// does not read: it shows the map's length.
type MapGroups uint8

const (
	// SlotGroups hold 8 slots, each a key and an elem (Go 1.24 on).
	SlotGroups MapGroups = iota
	// SplitGroups hold 8 keys, then 8 elems (GOEXPERIMENT=mapsplitgroup,
	// Go 1.27 on).
	SplitGroups
	// NoGroups: the map is Go's older hash map (before Go 1.24, or
	// GOEXPERIMENT=noswissmap), whose header starts with its length too.
	NoGroups
)

// MapGroupsOf says how the maps of a binary of the build info info keep
// their entries: as the Go release and the experiments it was built with
// lay them out (nil: as Go lays them out by default).
func MapGroupsOf(info *debug.BuildInfo) MapGroups {
	if info == nil {
		return SlotGroups
	}
	if version.IsValid(info.GoVersion) && version.Compare(info.GoVersion, "go1.24") < 0 {
		return NoGroups
	}
	for _, s := range info.Settings {
		if s.Key != "GOEXPERIMENT" {
			continue
		}
		for _, exp := range strings.Split(s.Value, ",") {
			switch exp {
			case "noswissmap":
				return NoGroups
			case "mapsplitgroup":
				return SplitGroups
			}
		}
	}
	return SlotGroups
}

// Offsets in the map's header, and what of it a plan reads.
const (
	mapUsed   = 0
	mapDirPtr = 16
	mapDirLen = 24
	mapHeader = 32
	// groupSlots is a group's slots (abi.MapGroupSlots), after its
	// control word.
	groupSlots = 8
	groupCtrl  = 8
)

// group is where a map's group keeps its keys and elems.
type group struct {
	key, elem                          *layout.Type
	keys, keyStride, elems, elemStride int
	size                               int
}

// group lays out the group of a map whose slot is slot (layout.Type's
// Elem of a map), if g has groups and slot is known.
func (g MapGroups) group(slot *layout.Type) (group, bool) {
	if g == NoGroups || slot == nil || len(slot.Fields) != 2 {
		return group{}, false
	}
	key, elem := slot.Fields[0].Type, slot.Fields[1].Type
	if key == nil || elem == nil {
		return group{}, false
	}
	gr := group{key: key, elem: elem, keys: groupCtrl}
	if g == SplitGroups {
		// On 64-bit architectures no key or elem is aligned to more than
		// the 8 bytes that 8 keys make a multiple of.
		gr.keyStride, gr.elemStride = int(key.Size), int(elem.Size)
		gr.elems = groupCtrl + groupSlots*gr.keyStride
		gr.size = gr.elems + groupSlots*gr.elemStride
	} else {
		gr.keyStride, gr.elemStride = int(slot.Size), int(slot.Size)
		gr.elems = groupCtrl + int(slot.Fields[1].Offset)
		gr.size = groupCtrl + groupSlots*int(slot.Size)
	}
	return gr, true
}

// slot returns where slot k's key and elem are in the group, and whether
// both lie within its first n bytes.
func (gr group) slot(k, n int) (key, elem int, ok bool) {
	key, elem = gr.keys+k*gr.keyStride, gr.elems+k*gr.elemStride
	return key, elem, key+int(gr.key.Size) <= n && elem+int(gr.elem.Size) <= n
}

// mapValue decodes the map whose header the plan read at hdr: its
// entries, when it keeps them in one group, sorted by key as fmt sorts
// them.
func (d *decoder) mapValue(t *layout.Type, hdr int) Value {
	m := mapValue{len: d.word(hdr + mapUsed)}
	gr, ok := d.p.groups.group(t.Elem)
	op, read := d.followed(hdr + mapDirPtr)
	// A group that could not be read shows the map's length alone.
	if m.len == 0 || !ok || !read || d.lost(hdr+mapDirPtr) || d.word(hdr+mapDirPtr) == 0 || d.word(hdr+mapDirLen) != 0 {
		return m
	}
	ctrl, full := d.word(int(op.Dst)), 0
	for k := range groupSlots {
		if ctrl>>(8*k)&0x80 != 0 {
			continue
		}
		full++
		if key, elem, ok := gr.slot(k, int(op.Max)); ok {
			m.entries = append(m.entries, entry{d.value(gr.key, int(op.Dst)+key), d.value(gr.elem, int(op.Dst)+elem)})
		}
	}
	if uint64(full) != m.len {
		// Read while the map changed: its slots are not its entries.
		return mapValue{len: m.len}
	}
	slices.SortStableFunc(m.entries, func(a, b entry) int { return compare(a.key, b.key) })
	return m
}

type entry struct{ key, elem Value }

// mapValue is a map: len entries, of which those read.
type mapValue struct {
	entries []entry
	len     uint64
}

func (m mapValue) String() string {
	s := make([]string, len(m.entries))
	for i, e := range m.entries {
		s[i] = e.key.String() + ":" + e.elem.String()
	}
	return "map[" + join(s, int(m.len)) + "]"
}

// JSON is an object keyed as encoding/json keys one (a string as itself,
// a number in decimal; another key as %v writes it), or, where the probe
// did not read every entry, the text.
func (m mapValue) JSON() any {
	if uint64(len(m.entries)) < m.len {
		return m.String()
	}
	o := make(map[string]any, len(m.entries))
	for _, e := range m.entries {
		o[e.jsonKey()] = e.elem.JSON()
	}
	return o
}

// jsonKey is the entry's key as encoding/json keys a map: a string as
// itself, a number in decimal, another key as %v writes it.
func (e entry) jsonKey() string {
	if t, ok := e.key.(text); ok {
		return JSONText(string(t))
	}
	return e.key.String()
}

// nilMap is a nil map: map[] as %+v prints it, null in JSON.
type nilMap struct{}

func (nilMap) String() string { return "map[]" }
func (nilMap) JSON() any      { return nil }

// compare orders two keys of a map as fmt does (internal/fmtsort):
// numbers by value (NaN first), strings by bytes, false before true,
// structs by field and arrays by element, in order. Others, and what the
// probe did not read, go by their text.
func compare(a, b Value) int {
	switch a := a.(type) {
	case integer:
		if b, ok := b.(integer); ok {
			return cmp.Compare(a, b)
		}
	case duration:
		if b, ok := b.(duration); ok {
			return cmp.Compare(a, b)
		}
	case natural:
		if b, ok := b.(natural); ok {
			return cmp.Compare(a, b)
		}
	case boolean:
		if b, ok := b.(boolean); ok {
			return cmp.Compare(boolRank(bool(a)), boolRank(bool(b)))
		}
	case float:
		if b, ok := b.(float); ok {
			return cmp.Compare(a, b)
		}
	case text:
		// By the bytes, not the text that escapes some.
		if b, ok := b.(text); ok {
			return strings.Compare(string(a), string(b))
		}
	case object:
		if b, ok := b.(object); ok && len(a.fields) == len(b.fields) {
			for i := range a.fields {
				if c := compare(a.fields[i].value, b.fields[i].value); c != 0 {
					return c
				}
			}
			return 0
		}
	case list:
		if b, ok := b.(list); ok {
			return slices.CompareFunc(a.elems, b.elems, compare)
		}
	}
	return strings.Compare(a.String(), b.String())
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
