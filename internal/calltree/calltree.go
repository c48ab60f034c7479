// Package calltree pairs the entry and exit events of automatic probes
// into calls, per goroutine: each call knows the innermost traced call
// still open on its goroutine when it began, its parent.
//
// A call opens at its function's entry event when the exit probe is traced
// too (trace.Event.Paired), and ends at the exit event. An exit without
// its entry (the probe traced alone, the call began before the tracer
// attached, or the entry's event was lost) is a call of its own, parented
// to the innermost open call that began before it; the calls open above
// that one began in it, and end there, marked Lost. An exit closes the
// innermost open call of its function; calls opened above it never saw
// their exit and end there: marked Lost where events of the goroutine
// were lost while they were open, else Unwound: with every event seen,
// they did not return, a panic went through them, and a caller of theirs
// recovered it (an exit probe fires at a return, not in a deferred call).
//
// Where the goroutine's events were lost (trace.Event.AfterLoss), the
// calls it had open may have returned in the gap without a sign: a call
// that begins under one of them before any has been seen to end since is
// marked Uncertain, its parent a guess. An exit seen of a call open
// through the gap shows that it and the calls it was in were still open.
// A call that an exit without its entry adopts is marked Uncertain too
// where events of its goroutine were lost between the two calls' starts:
// a call between them may have been lost whole.
//
// A call's place in time nests in its parent's, whatever the delays of the
// events. Where its exit's event carries the start time the program read
// (trace.Event.Start), the call starts then and ends that plus the
// elapsed time the exit probe measured, both by the program's own clock:
// a call read its start before it made any other call, and its end after
// they returned. Otherwise it starts at its entry's event (the entries of
// one goroutine come in order), or, without one, its exit's time less the
// elapsed time, and ends no earlier than its start plus the elapsed time.
// Either way it starts no earlier than its parent (as the parent stood
// then) and no later than any call it made, and ends no earlier than its
// start nor than any call it made: a parent that has the program's times
// and a child that has not, or a clock read off by a few nanoseconds,
// cannot put a child outside it. Its duration for profiles is what the
// exit probe measured.
package calltree

import (
	"slices"
	"time"

	"github.com/go-usdt/usdt/internal/trace"
)

// Call is one traced function call.
type Call struct {
	Function  string
	Package   string // the function's import path
	PID       int
	Goroutine uint64
	Parent    *Call // nil for a root
	// Entry is nil when only the exit was traced; Exit is nil until the
	// call ends.
	Entry, Exit *trace.Event
	// Start and End place the call in time, within its parent's.
	Start, End time.Time
	// Lost is set on a call whose exit event was not seen, ended when a
	// call it was in returned, or by Close: its End is the last end of
	// the calls it made, or its Start.
	Lost bool
	// Unwound is set instead of Lost where no event of the goroutine was
	// lost while the call was open: a panic unwound it.
	Unwound bool
	// Adopted is set on a call that opened at its exit, when calls open
	// on its goroutine had begun in it: the outermost of them, which is
	// its child from then on. Begin sees it set, so that a root made this
	// way can take over the trace the adopted call and its calls are in.
	Adopted *Call
	// Uncertain is set on a call that began under a call that was open
	// when events of the goroutine were lost, and not seen to end since:
	// that call may have returned in the gap, and this one be its
	// sibling's or a caller's; or on a call Adopted where events of the
	// goroutine were lost between the adopter's start and its own.
	Uncertain bool
	// Inner is the time spent in the calls it made that have ended: its
	// elapsed time less Inner is its own.
	Inner time.Duration
	// Data is the consumer's, for what it keeps with a call.
	Data any
	// first is the earliest start of the calls it made that have ended.
	first time.Time
	// gap is set while it is open through a loss of its goroutine's
	// events, until an exit shows it was.
	gap bool
	// lossBefore is when its goroutine's events were last seen lost
	// when it began, or may have been (Tree.forgot).
	lossBefore time.Time
}

// Elapsed is the call's duration, as its exit probe measured it; for a
// Lost call, End less Start.
func (c *Call) Elapsed() time.Duration {
	if c.Exit == nil {
		return c.End.Sub(c.Start)
	}
	return c.Exit.Elapsed
}

// Self is the call's duration less that of the traced calls it made.
func (c *Call) Self() time.Duration { return max(0, c.Elapsed()-c.Inner) }

type goroutine struct {
	pid int
	id  uint64
}

type thread struct{ pid, tid int }

// Tree holds the open calls of every goroutine.
type Tree struct {
	// Begin, when set, is called when a call opens (at its entry, or at
	// its exit when it had none), before any call under it opens.
	Begin func(*Call)
	// End is called when a call ends, before its parent ends.
	End  func(*Call)
	open map[goroutine][]*Call
	// last is the goroutine whose automatic probe fired last on a
	// thread, which OnThread goes by.
	last map[thread]goroutine
	// lost counts the calls ended Lost, unwound those ended Unwound,
	// and uncertain the calls ended that were marked Uncertain, per
	// goroutine.
	lost, unwound, uncertain counts
	// lossAt is the time of each goroutine's last event after a loss.
	// Past maxLossTimes goroutines, those with no call open are
	// forgotten: forgot is the latest time forgotten, which a call of a
	// goroutine with none kept takes for its loss.
	lossAt map[goroutine]time.Time
	forgot time.Time
}

// maxLossTimes bounds the goroutines whose last loss a Tree keeps
// without a call open.
const maxLossTimes = 1 << 16

// misplaced is how far before the innermost open call an exit-only call
// may seem to start and still be taken for its child: the delays of two
// events differ by microseconds. One that seems to start earlier still
// is not inside it: that call's exit was lost, and it is ended.
const misplaced = 100 * time.Microsecond

// Add takes one event; it ignores those of usdtgen probes and the entries
// of functions whose exit is not traced.
func (t *Tree) Add(ev *trace.Event) {
	if ev.Function == "" {
		return
	}
	if t.open == nil {
		t.open, t.last = map[goroutine][]*Call{}, map[thread]goroutine{}
	}
	g := goroutine{ev.PID, ev.Goroutine}
	t.last[thread{ev.PID, ev.TID}] = g
	stack := t.open[g]
	if ev.AfterLoss {
		for _, c := range stack {
			c.gap = true
		}
		t.lostAt(g, ev.Time)
	}
	if !ev.Exit {
		if ev.Paired {
			c := &Call{Function: ev.Function, Package: ev.Package, PID: ev.PID, Goroutine: ev.Goroutine, Entry: ev, Start: ev.Time, lossBefore: t.forgot}
			if at, ok := t.lossAt[g]; ok {
				c.lossBefore = at
			}
			if len(stack) > 0 {
				c.Parent = stack[len(stack)-1]
			}
			guess(c)
			t.open[g] = append(stack, c)
			t.begin(c)
		}
		return
	}
	var c *Call
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i].Function == ev.Function {
			c = stack[i]
			t.abandon(g, stack[i+1:])
			stack = stack[:i]
			// c was open all along, and so were the calls it was in;
			// unless an outer call of c's function is open too: then
			// the exit may be its, c's lost in the gap.
			if !slices.ContainsFunc(stack, func(o *Call) bool { return o.Function == c.Function }) {
				for x := c; x.Parent != nil && !x.Uncertain; x = x.Parent {
					x.Parent.gap = false
				}
			}
			break
		}
	}
	if c == nil {
		start := ev.Time.Add(-ev.Elapsed)
		if !ev.Start.IsZero() {
			start = ev.Start
		}
		i := len(stack)
		for i > 0 && stack[i-1].Start.After(start.Add(misplaced)) {
			i--
		}
		c = &Call{Function: ev.Function, Package: ev.Package, PID: ev.PID, Goroutine: ev.Goroutine}
		if i > 0 {
			c.Parent = stack[i-1]
		}
		guess(c)
		c.startAt(start)
		// The calls that began after c did in c: their exits were lost.
		// The outermost is c's child, unless a call between them was
		// lost whole: events were lost after c began and before it did.
		if i < len(stack) {
			c.Adopted = stack[i]
			if c.Adopted.lossBefore.After(start.Add(-misplaced)) {
				c.Adopted.Uncertain = true
			}
		}
		t.begin(c)
		if c.Adopted != nil {
			c.Adopted.Parent = c
		}
		t.abandon(g, stack[i:])
		stack = stack[:i]
	}
	if len(stack) == 0 {
		delete(t.open, g)
	} else {
		t.open[g] = stack
	}
	c.Exit = ev
	end := c.Start.Add(ev.Elapsed)
	if !ev.Start.IsZero() {
		c.startAt(ev.Start)
		end = ev.Start.Add(ev.Elapsed)
	}
	t.end(c, end)
}

// startAt starts c at s, but no earlier than its parent nor later than the
// calls it made.
func (c *Call) startAt(s time.Time) {
	c.Start = s
	if p := c.Parent; p != nil && c.Start.Before(p.Start) {
		c.Start = p.Start
	}
	if !c.first.IsZero() && c.first.Before(c.Start) {
		c.Start = c.first
	}
}

// end ends c no earlier than at, nor than its start, nor than the calls it
// made.
func (t *Tree) end(c *Call, at time.Time) {
	if c.Uncertain {
		t.uncertain.add(goroutine{c.PID, c.Goroutine})
	}
	c.End = slices.MaxFunc([]time.Time{c.End, at, c.Start}, time.Time.Compare)
	if p := c.Parent; p != nil {
		p.Inner += c.Elapsed()
		p.End = slices.MaxFunc([]time.Time{p.End, c.End}, time.Time.Compare)
		if p.first.IsZero() || c.Start.Before(p.first) {
			p.first = c.Start
		}
	}
	if t.End != nil {
		t.End(c)
	}
}

// abandon ends the open calls of g above the one an exit closes, the
// innermost first: their exits were lost, or, where none of g's events
// was lost while they were open, they did not return.
func (t *Tree) abandon(g goroutine, above []*Call) {
	for i := len(above) - 1; i >= 0; i-- {
		c := above[i]
		if c.gap {
			t.lost.add(g)
			t.endLost(c)
			continue
		}
		t.unwound.add(g)
		c.Unwound = true
		t.end(c, c.Start)
	}
}

// endLost ends c, whose exit was not seen, with the calls it made.
func (t *Tree) endLost(c *Call) {
	c.Lost = true
	t.end(c, c.Start)
}

// lostAt notes that events of g were lost before one at the time at.
func (t *Tree) lostAt(g goroutine, at time.Time) {
	if t.lossAt == nil {
		t.lossAt = map[goroutine]time.Time{}
	}
	if len(t.lossAt) >= maxLossTimes {
		for o, when := range t.lossAt {
			if len(t.open[o]) == 0 {
				if when.After(t.forgot) {
					t.forgot = when
				}
				delete(t.lossAt, o)
			}
		}
	}
	t.lossAt[g] = at
}

// guess marks c Uncertain where its parent is open through a loss.
func guess(c *Call) {
	c.Uncertain = c.Parent != nil && c.Parent.gap
}

// Uncertain reports how many calls that ended were marked Uncertain, and
// on how many goroutines.
func (t *Tree) Uncertain() (calls, goroutines int) { return t.uncertain.total() }

// Lost reports how many calls were ended Lost, and on how many
// goroutines.
func (t *Tree) Lost() (calls, goroutines int) { return t.lost.total() }

// Unwound reports how many calls were ended Unwound, and on how many
// goroutines.
func (t *Tree) Unwound() (calls, goroutines int) { return t.unwound.total() }

// counts counts calls per goroutine.
type counts map[goroutine]int

func (c *counts) add(g goroutine) {
	if *c == nil {
		*c = counts{}
	}
	(*c)[g]++
}

// total is how many calls, on how many goroutines.
func (c counts) total() (calls, goroutines int) {
	for _, n := range c {
		calls += n
	}
	return calls, len(c)
}

func (t *Tree) begin(c *Call) {
	if t.Begin != nil {
		t.Begin(c)
	}
}

// OnThread returns the innermost open call of the goroutine whose
// automatic probe fired last on the thread, nil when it has none. An event
// of a usdtgen probe, which does not know its goroutine, belongs there as
// long as that goroutine did not leave the thread since, which a Go
// program does at its scheduler's will: a guess, right when the probe
// fires in the traced call's own code, with no blocking in between.
func (t *Tree) OnThread(pid, tid int) *Call {
	g, ok := t.last[thread{pid, tid}]
	if !ok {
		return nil
	}
	stack := t.open[g]
	if len(stack) == 0 {
		return nil
	}
	return stack[len(stack)-1]
}

// Close ends the calls still open, the innermost first, marked Lost (their
// exits were not seen: they had not returned, or the events were lost),
// so that the calls they made keep their parent. It returns how many it
// ended.
func (t *Tree) Close() int {
	n := 0
	for g, stack := range t.open {
		for i := len(stack) - 1; i >= 0; i-- {
			t.endLost(stack[i])
			n++
		}
		delete(t.open, g)
	}
	return n
}

// Open reports the number of calls open, which end with no exit seen when
// the tracer stops.
func (t *Tree) Open() int {
	n := 0
	for _, s := range t.open {
		n += len(s)
	}
	return n
}
