package values

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/go-usdt/usdt/internal/layout"
)

// Value is a decoded Go value: String is what %+v prints, JSON what the
// tracer's -json writes.
type Value interface {
	String() string
	JSON() any
}

// Namer describes the type whose runtime descriptor is at an address
// (see TypeNames.Type); nil describes none.
type Namer func(addr uint64) (Dynamic, error)

// Decode decodes argument i of an event, whose raw value the probe passed
// was raw and whose value area is area, as the layout l describes it.
// It reports false when the plan reads nothing of that argument.
func (p *Plan) Decode(i int, l *layout.Type, raw uint64, area []byte, names Namer) (Value, bool) {
	op, ok := p.Root(i)
	if !ok {
		return nil, false
	}
	d := decoder{p: p, area: area, names: names, seen: map[uint64]bool{}}
	if raw != 0 && d.failed(p.roots[i]-1) {
		return unreadable(raw), true
	}
	switch l.Kind {
	case layout.Pointer:
		if raw == 0 {
			return null{}, true
		}
		d.seen[raw] = true
		return pointer{d.value(l.Elem, int(op.Dst))}, true
	case layout.Map:
		if raw == 0 {
			return nilMap{}, true
		}
		return d.mapValue(l, int(op.Dst)), true
	}
	v := d.value(l, int(op.Dst))
	if byteSlice(l) {
		// Quoted, as a string argument is: bare, the text could hold the
		// ", " that separates an event's values.
		switch v := v.(type) {
		case text:
			return quotedText(v), true
		case cutText:
			return quotedCutText(v), true
		}
	}
	return v, true
}

type decoder struct {
	p     *Plan
	area  []byte
	names Namer
	// seen holds the pointers followed on the way to the value at hand.
	seen map[uint64]bool
	// dynamic is where, in the area, the bytes of the interface's value
	// at hand start and end (see iface).
	dynamic [2]int
}

func (d *decoder) bytes(off, n int) []byte {
	// n > len-off, not off+n > len: a layout's size can be anything, and
	// off+n overflow.
	if off < 0 || n < 0 || off > len(d.area) || n > len(d.area)-off {
		return nil
	}
	return d.area[off : off+n]
}

func (d *decoder) word(off int) uint64 {
	if b := d.bytes(off, 8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// followedBy is the index of the op that read what the pointer at off
// points to.
func (d *decoder) followedBy(off int) (int, bool) {
	j, ok := d.p.follow[uint16(off)]
	return j, ok && off >= 0 && off <= math.MaxUint16
}

// followed is the op that read what the pointer at off points to.
func (d *decoder) followed(off int) (Op, bool) {
	j, ok := d.followedBy(off)
	if !ok {
		return Op{}, false
	}
	return d.p.Ops[j], true
}

// lost reports whether the op that read what the pointer at off points
// to failed: its value is unreadable, not the zeros its bytes hold.
func (d *decoder) lost(off int) bool {
	j, ok := d.followedBy(off)
	return ok && d.failed(j)
}

// failed reports whether op j failed, by the area's status word.
func (d *decoder) failed(j int) bool { return Failed(d.area, j) }

// Failed reports whether the value area says that read j of its plan
// failed (see StatusSize).
func Failed(area []byte, j int) bool {
	if j < 0 || j >= MaxOps || len(area) < 4 {
		return false
	}
	return binary.LittleEndian.Uint32(area)&(1<<j) != 0
}

func (d *decoder) value(t *layout.Type, off int) Value {
	if t == nil || !sized(t) {
		return unknown("?")
	}
	b := d.bytes(off, int(t.Size))
	if b == nil && t.Size > 0 || d.unread(t, off) {
		return unknown("...")
	}
	switch t.Kind {
	case layout.Bool:
		return boolean(b[0] != 0)
	case layout.Int:
		v := signed(b)
		if t.Name == "time.Duration" {
			// Written as Go writes it: String in text, the number of
			// nanoseconds in JSON, as encoding/json does.
			return duration(v)
		}
		return integer(v)
	case layout.Uint:
		return natural(unsigned(b))
	case layout.Float:
		var f float64
		if t.Size == 4 {
			f = float64(math.Float32frombits(uint32(unsigned(b))))
		} else {
			f = math.Float64frombits(unsigned(b))
		}
		return float(f)
	case layout.String:
		return d.str(off)
	case layout.Pointer:
		addr := d.word(off)
		if addr == 0 {
			return null{}
		}
		op, ok := d.followed(off)
		if !ok || d.seen[addr] || t.Elem == nil {
			return address(addr)
		}
		if d.lost(off) {
			return unreadable(addr)
		}
		d.seen[addr] = true
		defer delete(d.seen, addr)
		return pointer{d.value(t.Elem, int(op.Dst))}
	case layout.Struct:
		if t.Name == "time.Time" {
			return d.time(off)
		}
		s := object{cut: t.Cut, fields: make([]field, 0, len(t.Fields))}
		for _, f := range t.Fields {
			s.fields = append(s.fields, field{f.Name, d.value(f.Type, off+int(f.Offset)), f.Embedded})
		}
		return s
	case layout.Array:
		var l list
		l.len = int(t.Len)
		if t.Elem == nil {
			return l
		}
		l.elems = make([]Value, 0, max(0, min(t.Len, ElemsMax, max(OpMax/max(t.Elem.Size, 1), 1))))
		for k := 0; k < int(min(t.Len, ElemsMax)) && int64(k+1)*t.Elem.Size <= OpMax; k++ {
			l.elems = append(l.elems, d.value(t.Elem, off+k*int(t.Elem.Size)))
		}
		return l
	case layout.Slice:
		if d.word(off) == 0 {
			if d.word(off+8) != 0 {
				return unreadable(0) // torn, as in str
			}
			return nilSlice{}
		}
		n := int(d.word(off + 8))
		if byteSlice(t) {
			return d.str(off)
		}
		if d.lost(off) {
			return unreadable(d.word(off))
		}
		l := list{len: n}
		op, ok := d.followed(off)
		if !ok || t.Elem == nil || t.Elem.Size == 0 {
			return l
		}
		l.elems = make([]Value, 0, max(0, min(n, int(op.Max)/int(t.Elem.Size))))
		for k := 0; k < n && k < int(op.Max)/int(t.Elem.Size); k++ {
			l.elems = append(l.elems, d.value(t.Elem, int(op.Dst)+k*int(t.Elem.Size)))
		}
		return l
	case layout.Map:
		if d.word(off) == 0 {
			return nilMap{}
		}
		if d.lost(off) {
			return unreadable(d.word(off))
		}
		if op, ok := d.followed(off); ok {
			return d.mapValue(t, int(op.Dst))
		}
		return address(d.word(off))
	case layout.Iface, layout.Eface:
		return d.iface(t, off)
	case layout.Func, layout.Chan, layout.UnsafePointer:
		if d.word(off) == 0 {
			return null{}
		}
	}
	return address(d.word(off))
}

// byteSlice says t is a []byte, which shows as the string it holds, up
// to StringMax bytes of it.
func byteSlice(t *layout.Type) bool {
	return t.Kind == layout.Slice && t.Elem != nil && t.Elem.Kind == layout.Uint && t.Elem.Size == 1
}

// sized reports whether a number or a bool can have t's size. A layout
// read from a type descriptor can say anything: an interface's type word
// read from memory the program is changing points anywhere.
func sized(t *layout.Type) bool {
	switch t.Kind {
	case layout.Bool:
		return t.Size == 1
	case layout.Int, layout.Uint:
		return t.Size == 1 || t.Size == 2 || t.Size == 4 || t.Size == 8
	case layout.Float:
		return t.Size == 4 || t.Size == 8
	}
	return true
}

// unread reports whether the value of type t at off lies, in part, past
// the bytes read of the interface's value at hand: a struct or an array
// shows the fields and elements that do not.
func (d *decoder) unread(t *layout.Type, off int) bool {
	if t.Kind == layout.Struct && t.Name != "time.Time" || t.Kind == layout.Array {
		return false
	}
	return d.dynamic[1] > 0 && off >= d.dynamic[0] && off+int(t.Size) > d.dynamic[1]
}

// str decodes the string (or []byte) header at off.
func (d *decoder) str(off int) Value {
	n := d.word(off + 8)
	if n == 0 {
		return text("")
	}
	op, ok := d.followed(off)
	if !ok {
		return unknown(fmt.Sprintf("<%d bytes>", n))
	}
	// A nil pointer with a length is a header a data race tore: the
	// writers read nothing at nil, and set no bit for it.
	if d.lost(off) || d.word(off) == 0 {
		return unreadable(d.word(off))
	}
	shown := d.bytes(int(op.Dst), int(min(n, uint64(op.Max))))
	if uint64(len(shown)) < n {
		return cutText{string(shown), n}
	}
	return text(shown)
}

// time decodes a time.Time (wall uint64, ext int64, loc *Location) as
// the time package does. A location other than UTC is known by its name,
// loaded on the tracer's machine ("Local" is the tracer's local zone).
func (d *decoder) time(off int) Value {
	const (
		hasMonotonic   = 1 << 63
		wallToInternal = (1884*365 + 1884/4 - 1884/100 + 1884/400) * 86400
		unixToInternal = (1969*365 + 1969/4 - 1969/100 + 1969/400) * 86400
	)
	wall, ext := d.word(off), int64(d.word(off+8))
	sec := ext
	if wall&hasMonotonic != 0 {
		sec = wallToInternal + int64(wall<<1>>31)
	}
	t := time.Unix(sec-unixToInternal, int64(wall&(1<<30-1))).UTC()
	if loc := d.word(off + 16); loc != 0 {
		if op, ok := d.followed(off + 16); ok {
			switch name := d.str(int(op.Dst)).String(); name {
			case "Local":
				t = t.Local()
			case "UTC", "":
			default:
				if l, err := time.LoadLocation(name); err == nil {
					t = t.In(l)
				}
			}
		}
	}
	s := t.Format(time.RFC3339Nano)
	return scalar{s, s}
}

// iface decodes an interface: its dynamic type's name, from the binary,
// and the value: the message of an error of errors.New, fmt.Errorf and
// *fs.PathError, else the value the data points to as its type's
// descriptors lay it out (strings, numbers, bools, structs and arrays;
// what the probe did not read of it shows as such), or for a value the
// data word is, its type and that word.
func (d *decoder) iface(t *layout.Type, off int) Value {
	typ := d.word(off)
	if typ == 0 {
		return null{}
	}
	if t.Kind == layout.Iface {
		op, ok := d.followed(off)
		if !ok {
			return address(d.word(off + 8))
		}
		if d.lost(off) {
			return unreadable(typ)
		}
		typ = d.word(int(op.Dst) + 8)
	}
	var dyn Dynamic
	if d.names != nil {
		dyn, _ = d.names(typ)
	}
	data := d.word(off + 8)
	dop, ok := d.followed(off + 8)
	if !ok || dyn.Name == "" {
		return dynamicValue{dyn.Name, address(data)}
	}
	if d.lost(off + 8) {
		return dynamicValue{dyn.Name, unreadable(data)}
	}
	at := int(dop.Dst)
	switch dyn.Name {
	case "*errors.errorString", "*fmt.wrapError", "*fmt.wrapErrors":
		return message(d.str(at).String())
	case "*fs.PathError":
		msg := d.str(at).String() + " " + d.str(at+16).String()
		if eop, ok := d.followed(at + 40); ok {
			if n := d.word(int(eop.Dst)); n > 0 && n < 4096 {
				msg += ": " + syscall.Errno(n).Error()
			}
		}
		return message(msg)
	}
	if dyn.Layout == nil {
		return dynamicValue{dyn.Name, address(data)}
	}
	// The probe read DynamicSize bytes of the value: past them, it shows
	// as unread.
	outer := d.dynamic
	d.dynamic = [2]int{at, at + int(dop.Max)}
	defer func() { d.dynamic = outer }()
	return d.value(dyn.Layout, at)
}

func unsigned(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func signed(b []byte) int64 {
	shift := 64 - 8*len(b)
	return int64(unsigned(b)<<shift) >> shift
}

type scalar struct {
	text string
	json any
}

func (s scalar) String() string { return s.text }
func (s scalar) JSON() any      { return s.json }

// integer, natural and boolean are a Go integer's or bool's value, and
// duration a time.Duration's: their text is made only when asked (an
// exporter sends the number), and a small one is boxed without an
// allocation.
type (
	integer  int64
	natural  uint64
	boolean  bool
	duration int64
)

func (i integer) String() string { return strconv.FormatInt(int64(i), 10) }
func (i integer) JSON() any      { return int64(i) }
func (n natural) String() string { return strconv.FormatUint(uint64(n), 10) }
func (n natural) JSON() any      { return uint64(n) }
func (b boolean) String() string { return strconv.FormatBool(bool(b)) }
func (b boolean) JSON() any      { return bool(b) }

// String is as Go writes a time.Duration, JSON the number of
// nanoseconds, as encoding/json writes one.
func (d duration) String() string { return time.Duration(d).String() }
func (d duration) JSON() any      { return int64(d) }

type float float64

func (f float) String() string { return strconv.FormatFloat(float64(f), 'g', -1, 64) }

// JSON is the number, or as Go's encoding/json cannot write NaN and the
// infinities, their names.
func (f float) JSON() any {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return f.String()
	}
	return float64(f)
}

// text is a string or a []byte, as the traced program holds it: any
// bytes at all.
type text string

func (t text) String() string { return Escape(string(t)) }
func (t text) JSON() any      { return JSONText(string(t)) }

// cutText is a string of which the probe read the first bytes, which may
// end inside a character.
type cutText struct {
	shown string
	len   uint64
}

func (c cutText) String() string { return fmt.Sprintf("%s...(%d bytes)", Escape(c.shown), c.len) }
func (c cutText) JSON() any      { return fmt.Sprintf("%s...(%d bytes)", JSONText(c.shown), c.len) }

// quotedText is a []byte argument or result, shown as %q shows it.
type quotedText text

func (t quotedText) String() string { return strconv.Quote(string(t)) }
func (t quotedText) JSON() any      { return text(t).JSON() }

// quotedCutText is a []byte argument or result read in part.
type quotedCutText cutText

func (c quotedCutText) String() string { return fmt.Sprintf("%q...(%d bytes)", c.shown, c.len) }
func (c quotedCutText) JSON() any      { return cutText(c).JSON() }

// Escape escapes the bytes of s that are not valid UTF-8 and the
// characters strconv.IsPrint rejects, control characters among them, as
// Go's %q does (\x00, \n, \xff, \u2028), so that a value's text shows what
// the program holds and is safe to print and to send as a string, which
// protobuf's must be valid UTF-8. Unlike %q it adds no quotes and leaves
// quotes and backslashes as they are: a value that needs no escape shows
// as %+v shows it.
func Escape(s string) string {
	var b []byte
	done := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c < utf8.RuneSelf && c != 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if c >= utf8.RuneSelf && (r != utf8.RuneError || size > 1) && strconv.IsPrint(r) {
			i += size
			continue
		}
		q := strconv.Quote(s[i : i+size])
		b = append(append(b, s[done:i]...), q[1:len(q)-1]...)
		i += size
		done = i
	}
	if b == nil {
		return s
	}
	return string(append(b, s[done:]...))
}

// EscapeLines is Escape for a text laid out in lines, such as an
// error's message, which may quote names a binary gives: it keeps the
// newlines and tabs, which lay the text out and write no escape
// sequence, and escapes the rest.
func EscapeLines(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexAny(s, "\n\t")
		if i < 0 {
			b.WriteString(Escape(s))
			return b.String()
		}
		b.WriteString(Escape(s[:i]))
		b.WriteByte(s[i])
		s = s[i+1:]
	}
}

// JSONText is s as JSON holds a string: s itself when it is valid UTF-8,
// whose control characters encoding/json escapes so that they read back
// as they were, else escaped, where encoding/json would replace each
// invalid byte with U+FFFD and lose what it was.
func JSONText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return Escape(s)
}

// message is an error's message.
type message string

func (m message) String() string { return string(m) }
func (m message) JSON() any      { return string(m) }

// nilSlice is a nil slice: [] as %+v prints it, null in JSON.
type nilSlice struct{}

func (nilSlice) String() string { return "[]" }
func (nilSlice) JSON() any      { return nil }

type null struct{}

func (null) String() string { return "<nil>" }
func (null) JSON() any      { return nil }

// address is a pointer the plan did not follow: past its depth or
// budget, or back to a value on the way to it.
type address uint64

func (a address) String() string { return fmt.Sprintf("%#x", uint64(a)) }
func (a address) JSON() any      { return a.String() }

// Unreadable is the value at addr that a probe could not read.
func Unreadable(addr uint64) Value { return unreadable(addr) }

// unreadable is a value the probe could not read, at its address: the
// memory was not there when it fired (unmapped, freed, or a header torn
// by a data race pointed nowhere). Never zeros, never half a value.
type unreadable uint64

func (u unreadable) String() string { return fmt.Sprintf("<unreadable %#x>", uint64(u)) }
func (u unreadable) JSON() any {
	return map[string]string{"unreadable": fmt.Sprintf("%#x", uint64(u))}
}

// unknown is what the probe did not read.
type unknown string

func (u unknown) String() string { return string(u) }
func (u unknown) JSON() any      { return string(u) }

type pointer struct{ to Value }

func (p pointer) String() string { return "&" + p.to.String() }
func (p pointer) JSON() any      { return p.to.JSON() }

// dynamicValue is an interface's value of a type the decoder does not
// read: its type's name and its data word.
type dynamicValue struct {
	typ  string
	data Value
}

func (v dynamicValue) String() string {
	if v.typ == "" {
		return v.data.String()
	}
	// The name is what the type word led to: a word read from memory the
	// program was changing may lead to any bytes of the binary.
	return "(" + Escape(v.typ) + ")" + v.data.String()
}
func (v dynamicValue) JSON() any { return v.String() }

type field struct {
	name     string
	value    Value
	embedded bool
}

// object is a struct, its fields in order.
type object struct {
	fields []field
	cut    bool
}

func (o object) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o.fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Escape(f.name) + ":" + f.value.String())
	}
	if o.cut {
		b.WriteString(" ...")
	}
	b.WriteByte('}')
	return b.String()
}

func (o object) JSON() any { return o }

// MarshalJSON writes the fields as encoding/json does: an embedded
// struct's fields as the outer struct's (AppendJSON).
func (o object) MarshalJSON() ([]byte, error) { return AppendJSON(nil, o) }

func (o object) flat() []field {
	var out []field
	for _, f := range o.fields {
		inner, ok := f.value.(object)
		if p, isPtr := f.value.(pointer); isPtr {
			inner, ok = p.to.(object)
		}
		if f.embedded && ok {
			out = append(out, inner.flat()...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// list is an array's or a slice's elements, len of them in all.
type list struct {
	elems []Value
	len   int
}

func (l list) String() string {
	s := make([]string, len(l.elems))
	for i, e := range l.elems {
		s[i] = e.String()
	}
	return "[" + join(s, l.len) + "]"
}

func (l list) JSON() any {
	if len(l.elems) == 0 && l.len > 0 {
		// None read (a []T in generic code, or past the budget): an
		// empty array would say there are none, so its text says how
		// many, as for a map not read.
		return l.String()
	}
	out := make([]any, len(l.elems))
	for i, e := range l.elems {
		out[i] = e.JSON()
	}
	return out
}

// join is what %+v writes of a list or a map's entries, of which shown are
// those read of n, with how many there are where that is not all.
func join(shown []string, n int) string {
	if len(shown) < n {
		shown = append(shown, fmt.Sprintf("...(len %d)", n))
	}
	return strings.Join(shown, " ")
}
