// Package calltree pairs the entry and exit events of automatic probes
// into calls, per goroutine: each call knows the innermost traced call
// still open on its goroutine when it began, its parent.
//
// A call opens at its function's entry event when the exit probe is traced
// too (trace.Event.Paired), and ends at the exit event: its time span is
// the exit's time less the elapsed time the exit probe measured. An exit
// without its entry (the probe traced alone, or the call began before the
// tracer attached) is a call of its own, parented to the innermost open
// call. An exit closes the innermost open call of its function; calls
// opened above it never saw their exit (an event lost, or a panic through
// them) and are abandoned: they are never ended.
package calltree

import (
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
	Start, End  time.Time
	// Inner is the time spent in the calls it made that have ended: its
	// elapsed time less Inner is its own.
	Inner time.Duration
	// Data is the consumer's, for what it keeps with a call.
	Data any
}

// Elapsed is the call's duration, as its exit probe measured it.
func (c *Call) Elapsed() time.Duration { return c.End.Sub(c.Start) }

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
}

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
	if !ev.Exit {
		if ev.Paired {
			c := &Call{Function: ev.Function, Package: ev.Package, PID: ev.PID, Goroutine: ev.Goroutine, Entry: ev, Start: ev.Time}
			if len(stack) > 0 {
				c.Parent = stack[len(stack)-1]
			}
			t.open[g] = append(stack, c)
			t.begin(c)
		}
		return
	}
	var c *Call
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i].Function == ev.Function {
			c, stack = stack[i], stack[:i]
			break
		}
	}
	if c == nil {
		c = &Call{Function: ev.Function, Package: ev.Package, PID: ev.PID, Goroutine: ev.Goroutine}
		if len(stack) > 0 {
			c.Parent = stack[len(stack)-1]
		}
		t.begin(c)
	}
	if len(stack) == 0 {
		delete(t.open, g)
	} else {
		t.open[g] = stack
	}
	c.Exit, c.End = ev, ev.Time
	c.Start = ev.Time.Add(-ev.Elapsed)
	if c.Parent != nil {
		c.Parent.Inner += ev.Elapsed
	}
	if t.End != nil {
		t.End(c)
	}
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

// Open reports the number of calls open, which end with no exit seen when
// the tracer stops.
func (t *Tree) Open() int {
	n := 0
	for _, s := range t.open {
		n += len(s)
	}
	return n
}
