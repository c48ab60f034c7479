package trace

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
	"github.com/go-usdt/usdt/internal/values"
)

// decoder turns the records the event program sends into Events: every
// output reads the one Event a record becomes.
type decoder struct {
	sites []site
	// mono converts the records' CLOCK_MONOTONIC times to wall-clock time.
	mono   time.Duration
	filter int // tgid, 0 for all
	// paired are the functions whose exit probe is traced.
	paired map[string]bool
	names  *typeNames
	// open holds, per process and goroutine, the calls of functions
	// whose sites are notes (see timeNotes) that have not returned yet.
	open map[[2]uint64][]openCall
	// jsonOnly leaves the values' Text out: only -json reads the
	// events, and a large value's text cost as much as its decoding.
	jsonOnly bool
}

// openCall is a call whose entry event was seen and exit event not yet.
type openCall struct {
	fn    string
	start time.Time
}

// maxOpen bounds the calls timeNotes remembers of one goroutine: deeper
// ones, and those whose exit events were lost, are forgotten.
const maxOpen = 1024

func newDecoder(sites []site, pid int, names *typeNames) *decoder {
	d := &decoder{sites: sites, mono: monoOffset(), filter: pid, names: names, paired: map[string]bool{}}
	for _, s := range sites {
		if s.exit {
			d.paired[s.fn] = true
		}
	}
	return d
}

// decode returns the Event of a record, nil for one of another process
// than the traced one's or one too damaged to name its site. What a
// consumer may never read, the values of its arguments and results, it
// decodes when first asked (Event.Values): a span that sampling drops,
// or a call that only pairs with another, costs no value decoding.
func (d *decoder) decode(b []byte) *Event {
	if len(b) < bpfprog.RecSmall {
		return nil
	}
	pidTgid := le.Uint64(b[bpfprog.RecPidTgid:])
	tgid, tid := int(pidTgid>>32), int(uint32(pidTgid))
	if d.filter != 0 && tgid != d.filter {
		return nil
	}
	idx := int(le.Uint32(b[bpfprog.RecCookie:]))
	if idx >= len(d.sites) {
		return nil
	}
	s := &d.sites[idx]
	ev := &Event{
		AfterLoss: s.fn != "" && le.Uint32(b[bpfprog.RecFlags:])&bpfprog.RecAfterLoss != 0,
		Time:      time.Unix(0, int64(le.Uint64(b[bpfprog.RecTime:]))+int64(d.mono)),
		PID:       tgid, TID: tid, Provider: s.Provider, Probe: s.Name,
		Function: s.fn, Exit: s.exit, Paired: s.fn != "" && !s.exit && d.paired[s.fn],
		Dropped: s.dropped,
	}
	raw := func(i int) value {
		return value{raw: le.Uint64(b[bpfprog.RecArgs+8*i:]), signed: s.args[i].Signed, size: s.args[i].Size}
	}
	shown := 0 // the first argument shown as a value
	if s.fn != "" {
		ev.Package = s.table.Package
		if len(s.args) > 0 {
			ev.Goroutine, shown = raw(0).uint(), 1
		}
		if s.exit && len(s.args) > 1 {
			ev.Elapsed, shown = time.Duration(raw(1).uint()), 2
			// A negative start is in ticks (ringlayout.TicksTag), read for
			// a ring trace that counted while this call began.
			if start := int64(le.Uint64(b[bpfprog.RecStart:])); start > 0 {
				ev.Start = time.Unix(0, start+int64(d.mono))
			}
		}
		if s.table.Func != "" {
			d.timeNotes(s, ev, tgid)
		}
	}
	if shown == len(s.args) {
		return ev
	}
	lv := &lazyValues{s: s, shown: shown, text: !d.jsonOnly, raw: make([]value, len(s.args)-shown)}
	for i := range lv.raw {
		lv.raw[i] = raw(shown + i)
	}
	if slices.Contains(s.strs, true) {
		// The strings' slots: the record itself is the reader's, and
		// reused once decode returns.
		if end := min(len(b), bpfprog.RecStrings+bpfprog.StrMax*len(s.args)); end > bpfprog.RecStrings {
			lv.strs = bytes.Clone(b[bpfprog.RecStrings:end])
		}
	}
	if s.plan != nil {
		lv.area, lv.names = valueArea(s, b), d.names.of(tgid)
	}
	ev.lazy = lv
	return ev
}

// lazyValues is what an event's values are decoded from when first
// asked.
type lazyValues struct {
	mu      sync.Mutex
	decoded bool // vals are made, and the record's copies let go
	s       *site
	shown   int     // the site's first argument that is a value
	raw     []value // the arguments from shown on, as the record held them
	strs    []byte  // the record's string slots, from the first argument's
	area    []byte  // the record's value area, for a site with a plan
	names   values.Namer
	text    bool // the values' Text too
	vals    []Value
	// lastDone says that lastFailed holds whether the last value, an
	// error, is not nil (see Event.LastError).
	lastDone, lastFailed bool
}

// values decodes the values once, and lets go of the record's copies:
// an event a consumer keeps (a call still open) keeps only its values.
func (lv *lazyValues) values() []Value {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if !lv.decoded {
		lv.vals = lv.decode()
		lv.raw, lv.strs, lv.area, lv.names = nil, nil, nil, nil
		lv.decoded = true
	}
	return lv.vals
}

// lastError reports whether the site's last value is an error, and if
// so whether it is not nil, decoding that value alone where the others
// are not decoded yet.
func (lv *lazyValues) lastError() (isErr, failed bool) {
	decl := lv.declared()
	if len(decl) == 0 || decl[len(decl)-1].Type != "error" {
		return false, false
	}
	lv.mu.Lock()
	if !lv.decoded && !lv.lastDone && len(lv.raw) > 0 {
		j := len(lv.raw) - 1
		var area []byte
		if lv.s.plan != nil {
			area = fullArea(lv.area)
		}
		v := lv.raw[j]
		lv.fill(&v, lv.shown+j, area)
		lv.lastDone, lv.lastFailed = true, Value{Type: "error", Data: v.json()}.NonNilError()
	}
	if lv.lastDone {
		lv.mu.Unlock()
		return true, lv.lastFailed
	}
	lv.mu.Unlock()
	vs := lv.values()
	return true, len(vs) > 0 && vs[len(vs)-1].NonNilError()
}

// declared are the declarations of the values, where the probe table
// gives one for each of the site's arguments.
func (lv *lazyValues) declared() []probe.Arg {
	s := lv.s
	if len(s.table.Args) != len(s.args) {
		return nil
	}
	return s.table.Args[s.firstShown():]
}

// fill decodes v, the site's argument i, from its word, its string slot
// and the value area.
func (lv *lazyValues) fill(v *value, i int, area []byte) {
	s := lv.s
	if s.kinds != nil {
		v.kind = s.kinds[i]
	}
	if s.strs[i] && v.raw != 0 && len(lv.strs) >= bpfprog.StrMax*(i+1) {
		str := lv.strs[bpfprog.StrMax*i : bpfprog.StrMax*(i+1)]
		if n := bytes.IndexByte(str, 0); n >= 0 {
			str = str[:n]
		}
		t := string(str)
		v.str = &t
		if addr, ok := probe.ParseUnreadable(t); ok {
			v.val = values.Unreadable(addr)
		}
	}
	if v.val == nil {
		v.val = s.decodeValue(i, v.raw, area, lv.names)
	}
}

func (lv *lazyValues) decode() []Value {
	s := lv.s
	var area []byte
	if s.plan != nil {
		area = fullArea(lv.area)
	}
	for j := range lv.raw {
		lv.fill(&lv.raw[j], lv.shown+j, area)
	}
	decl := lv.declared()
	vals := make([]Value, len(lv.raw))
	for i, v := range lv.raw {
		vals[i] = Value{Name: s.names[i], Kind: v.kind, Data: v.json()}
		if lv.text {
			vals[i].Text = v.String()
		}
		if i < len(decl) {
			vals[i].Type = decl[i].Type
		}
	}
	return showPanics(vals)
}

// timeNotes gives the exit event of a function whose sites are notes,
// which has no code to time it (its elapsed argument is 0), the time
// since the entry event of the same call: the latest one of its
// goroutine that has not returned. Calls entered before tracing began,
// and those whose entry event was lost, stay at 0.
func (d *decoder) timeNotes(s *site, ev *Event, tgid int) {
	if d.open == nil {
		d.open = map[[2]uint64][]openCall{}
	}
	key := [2]uint64{uint64(tgid), ev.Goroutine}
	calls := d.open[key]
	if !s.exit {
		if len(calls) == maxOpen {
			calls = calls[1:]
		}
		d.open[key] = append(calls, openCall{s.fn, ev.Time})
		return
	}
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].fn == s.fn {
			ev.Start, ev.Elapsed = calls[i].start, ev.Time.Sub(calls[i].start)
			calls = calls[:i]
			break
		}
	}
	if len(calls) == 0 {
		delete(d.open, key)
	} else {
		d.open[key] = calls
	}
}

// forget drops the open calls of process pid: trace will decode no
// more of its events.
func (d *decoder) forget(pid int) {
	for key := range d.open {
		if key[0] == uint64(pid) {
			delete(d.open, key)
		}
	}
}

// value is one argument as the record holds it.
type value struct {
	raw    uint64
	signed bool
	size   int
	kind   probe.Kind // Invalid when the binary does not say
	str    *string
	// val is the value read through the argument, for those with a
	// layout.
	val values.Value
}

func (v value) int() int64 {
	shift := 64 - 8*v.size
	return int64(v.raw<<shift) >> shift
}

func (v value) uint() uint64 {
	shift := 64 - 8*v.size
	return v.raw << shift >> shift
}

func (v value) String() string {
	switch {
	case v.val != nil:
		return v.val.String()
	case v.str != nil:
		return strconv.Quote(*v.str)
	case v.kind == probe.Bool:
		return strconv.FormatBool(v.uint() != 0)
	case v.kind == probe.Pointer || v.kind == probe.Uintptr:
		return fmt.Sprintf("%#x", v.uint())
	case v.signed:
		return strconv.FormatInt(v.int(), 10)
	}
	return strconv.FormatUint(v.uint(), 10)
}

func (v value) json() any {
	switch {
	case v.val != nil:
		return values.JSONData(v.val)
	case v.str != nil:
		return values.JSONText(*v.str)
	case v.kind == probe.Bool:
		return v.uint() != 0
	case v.signed:
		return v.int()
	}
	return v.uint()
}
