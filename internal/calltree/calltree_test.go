package calltree

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/trace"
)

// at is a time n microseconds after an arbitrary origin.
func at(n int) time.Time { return time.Unix(1000, 0).Add(time.Duration(n) * time.Microsecond) }

func entry(g uint64, fn string, t int) *trace.Event {
	return &trace.Event{PID: 1, TID: int(g), Goroutine: g, Function: fn, Paired: true, Time: at(t)}
}

func exit(g uint64, fn string, t, elapsed int) *trace.Event {
	return &trace.Event{PID: 1, TID: int(g), Goroutine: g, Function: fn, Exit: true, Time: at(t), Elapsed: time.Duration(elapsed) * time.Microsecond}
}

// afterLoss marks ev as the first of its goroutine's events after a loss.
func afterLoss(ev *trace.Event) *trace.Event {
	ev.AfterLoss = true
	return ev
}

// exitFrom is an exit whose event carries the start time the program read.
func exitFrom(g uint64, fn string, t, elapsed, start int) *trace.Event {
	ev := exit(g, fn, t, elapsed)
	ev.Start = at(start)
	return ev
}

func TestTree(t *testing.T) {
	tests := []struct {
		name   string
		events []*trace.Event
		// want are the calls as they end: function<parent start-end self.
		want      string
		open      int
		lost      int // calls ended lost
		unwound   int // calls ended unwound
		uncertain int // calls marked uncertain
	}{
		{
			name: "nested",
			events: []*trace.Event{
				entry(1, "a", 0), entry(1, "b", 10), exit(1, "b", 30, 20), entry(1, "c", 40), exit(1, "c", 45, 5), exit(1, "a", 100, 100),
			},
			want: "b<a 10-30 20µs, c<a 40-45 5µs, a 0-100 75µs",
		},
		{
			name: "goroutines apart",
			events: []*trace.Event{
				entry(1, "a", 0), entry(2, "b", 5), exit(2, "b", 15, 10), exit(1, "a", 20, 20),
			},
			want: "b 5-15 10µs, a 0-20 20µs",
		},
		{
			// The entry's event starts the call, the elapsed time the
			// exit probe measured ends it.
			name:   "entry and elapsed",
			events: []*trace.Event{entry(1, "a", 0), exit(1, "a", 50, 48)},
			want:   "a 0-48 48µs",
		},
		{
			// b's exit event came late: a ends no earlier than b, its
			// own time as measured.
			name:   "late exit",
			events: []*trace.Event{entry(1, "a", 0), entry(1, "b", 10), exit(1, "b", 101, 90), exit(1, "a", 98, 95)},
			want:   "b<a 10-100 90µs, a 0-100 5µs",
		},
		{
			// b's entry was not seen, and its exit came early: it starts
			// no earlier than a.
			name:   "exit without entry before its parent",
			events: []*trace.Event{entry(1, "a", 10), exit(1, "b", 30, 25), exit(1, "a", 40, 30)},
			want:   "b<a 10-35 25µs, a 10-40 5µs",
		},
		{
			// c, whose entry was lost, began long before b, whose exit
			// was lost: b was in c, and ends lost. c's parent, open
			// through the loss, is a guess.
			name:      "exit without entry before a lost call",
			events:    []*trace.Event{entry(1, "a", 0), entry(1, "b", 500), afterLoss(exit(1, "c", 600, 300)), exit(1, "a", 700, 700)},
			want:      "b<c 500-500 0s lost, c<a 300-600 300µs uncertain, a 0-700 400µs",
			lost:      1,
			uncertain: 1,
		},
		{
			// c began before the trace did (its entry unseen, nothing
			// lost), b in it: b did not return, a panic unwound it.
			name:    "exit without entry before an unwound call",
			events:  []*trace.Event{entry(1, "a", 0), entry(1, "b", 500), exit(1, "c", 600, 300), exit(1, "a", 700, 700)},
			want:    "b<c 500-500 0s unwound, c<a 300-600 300µs, a 0-700 400µs",
			unwound: 1,
		},
		{
			// a's and b's entries were lost, c's seen after them, then
			// c's and b's exits lost: a adopts c, which may be b's or
			// any call's that a made in the gap.
			name:      "adopted after a loss",
			events:    []*trace.Event{afterLoss(entry(1, "c", 500)), afterLoss(exitFrom(1, "a", 900, 800, 5))},
			want:      "c<a 500-500 0s lost uncertain, a 5-805 800µs",
			lost:      1,
			uncertain: 1,
		},
		{
			// The loss came after a began and before c did, c's exit
			// seen after it: c is still a guess under a.
			name:      "adopted after a loss before it",
			events:    []*trace.Event{afterLoss(entry(1, "d", 10)), exit(1, "d", 12, 2), entry(1, "c", 500), afterLoss(exitFrom(1, "a", 900, 800, 5))},
			want:      "d 10-12 2µs, c<a 500-500 0s lost uncertain, a 5-805 800µs",
			lost:      1,
			uncertain: 1,
		},
		{
			// The last loss came before a began: c, which a adopts, was
			// surely a's.
			name:   "adopted after an earlier loss",
			events: []*trace.Event{afterLoss(entry(1, "d", 1)), exit(1, "d", 2, 1), entry(1, "c", 800), afterLoss(exitFrom(1, "a", 900, 500, 400))},
			want:   "d 1-2 1µs, c<a 800-800 0s lost, a 400-900 500µs",
			lost:   1,
		},
		{
			name:   "exit without entry",
			events: []*trace.Event{entry(1, "a", 0), exit(1, "b", 30, 10), exit(1, "a", 40, 40)},
			want:   "b<a 20-30 10µs, a 0-40 30µs",
		},
		{
			name:   "recursion",
			events: []*trace.Event{entry(1, "f", 0), entry(1, "f", 1), exit(1, "f", 3, 2), exit(1, "f", 4, 4)},
			want:   "f<f 1-3 2µs, f 0-4 2µs",
		},
		{
			// b's and d's exits were never seen, nor was any event
			// lost: a panic went through them, and a recovered it. a's
			// exit ends them, unwound, at the end of the last call
			// each made.
			name:    "unwound calls",
			events:  []*trace.Event{entry(1, "a", 0), entry(1, "b", 1), entry(1, "c", 2), exit(1, "c", 4, 2), entry(1, "d", 5), exit(1, "a", 9, 9)},
			want:    "c<b 2-4 2µs, d<b 5-5 0s unwound, b<a 1-5 2µs unwound, a 0-9 5µs",
			unwound: 2,
		},
		{
			// The same, a's exit the first event after a loss: b's and
			// d's exits were lost, maybe, and they end lost.
			name:   "lost exits",
			events: []*trace.Event{entry(1, "a", 0), entry(1, "b", 1), entry(1, "c", 2), exit(1, "c", 4, 2), entry(1, "d", 5), afterLoss(exit(1, "a", 9, 9))},
			want:   "c<b 2-4 2µs, d<b 5-5 0s lost, b<a 1-5 2µs lost, a 0-9 5µs",
			lost:   2,
		},
		{
			// The program's times: each call started after its entry's
			// event and ended before its exit's.
			name: "exact",
			events: []*trace.Event{
				entry(1, "a", 0), entry(1, "b", 10), exitFrom(1, "b", 30, 15, 12), entry(1, "c", 40), exitFrom(1, "c", 48, 5, 42), exitFrom(1, "a", 100, 95, 2),
			},
			want: "b<a 12-27 15µs, c<a 42-47 5µs, a 2-97 75µs",
		},
		{
			// a's exit has no start time (a fire function that copies a
			// string): it starts at its entry and ends after b, whose
			// times are the program's.
			name:   "exact child",
			events: []*trace.Event{entry(1, "a", 0), entry(1, "b", 10), exitFrom(1, "b", 30, 15, 12), exit(1, "a", 30, 26)},
			want:   "b<a 12-27 15µs, a 0-27 11µs",
		},
		{
			name:   "exact parent",
			events: []*trace.Event{entry(1, "a", 0), entry(1, "b", 10), exit(1, "b", 30, 15), exitFrom(1, "a", 100, 95, 2)},
			want:   "b<a 10-25 15µs, a 2-97 80µs",
		},
		{
			// b's entry was not seen: its start is the program's all
			// the same.
			name:   "exact exit without entry",
			events: []*trace.Event{entry(1, "a", 0), exitFrom(1, "b", 30, 10, 15), exitFrom(1, "a", 40, 38, 1)},
			want:   "b<a 15-25 10µs, a 1-39 28µs",
		},
		{
			// a's start time is after b's (a clock read off): a starts
			// no later than b.
			name:   "exact parent after its child's start",
			events: []*trace.Event{entry(1, "a", 0), entry(1, "b", 5), exitFrom(1, "b", 20, 10, 5), exit(1, "c", 30, 3), exitFrom(1, "a", 50, 44, 6)},
			want:   "b<a 5-15 10µs, c<a 27-30 3µs, a 5-50 31µs",
		},
		{
			// b's start by the program's clock is before a's entry event
			// (the clocks' reads a few nanoseconds apart): b starts no
			// earlier than a.
			name:   "exact child before its parent's entry",
			events: []*trace.Event{entry(1, "a", 10), entry(1, "b", 11), exitFrom(1, "b", 20, 8, 9), exit(1, "a", 30, 20)},
			want:   "b<a 10-17 8µs, a 10-30 12µs",
		},
		{
			// b's late exit (no start time) ends after a's end by the
			// program's clock: a ends with b.
			name:   "exact parent before a late child",
			events: []*trace.Event{entry(1, "a", 0), entry(1, "b", 10), exit(1, "b", 101, 90), exitFrom(1, "a", 98, 95, 1)},
			want:   "b<a 10-100 90µs, a 1-100 5µs",
		},
		{
			// b returned in the gap (its exit lost): d, a's, is taken
			// for b's, its parent a guess, until a's exit ends b lost.
			name: "call after a loss",
			events: []*trace.Event{
				entry(1, "a", 0), entry(1, "b", 1), afterLoss(entry(1, "d", 5)), exit(1, "d", 6, 1), exit(1, "a", 9, 9),
			},
			want:      "d<b 5-6 1µs uncertain, b<a 1-6 4µs lost, a 0-9 4µs",
			lost:      1,
			uncertain: 1,
		},
		{
			// b's exit shows it open through the gap, and a with it: c,
			// after, is surely b's, then e surely a's.
			name: "exit seen after a loss",
			events: []*trace.Event{
				entry(1, "a", 0), entry(1, "b", 1), afterLoss(entry(1, "c", 5)), exit(1, "c", 6, 1), entry(1, "x", 7), exit(1, "x", 8, 1), exit(1, "b", 9, 8), entry(1, "e", 10), exit(1, "e", 11, 1), exit(1, "a", 12, 12),
			},
			want:      "c<b 5-6 1µs uncertain, x<b 7-8 1µs uncertain, b<a 1-9 6µs, e<a 10-11 1µs, a 0-12 3µs",
			uncertain: 2,
		},
		{
			// f recurses; an exit of f after the loss may be the outer
			// call's, the inner one's lost: it shows nothing open, and
			// g, after, stays a guess.
			name: "recursion after a loss",
			events: []*trace.Event{
				entry(1, "a", 0), entry(1, "f", 1), entry(1, "f", 2), afterLoss(exit(1, "f", 5, 3)), entry(1, "g", 6), exit(1, "g", 7, 1), exit(1, "a", 9, 9),
			},
			want:      "f<f 2-5 3µs, g<f 6-7 1µs uncertain, f<a 1-7 2µs lost, a 0-9 3µs",
			lost:      1,
			uncertain: 1,
		},
		{
			// The loss hid a's exit and a new call's entry: f's exit
			// without its entry is a guess under the open b.
			name: "exit without entry after a loss",
			events: []*trace.Event{
				entry(1, "a", 0), entry(1, "b", 1), afterLoss(exit(1, "f", 9, 2)), exit(1, "b", 10, 9),
			},
			want:      "f<b 7-9 2µs uncertain, b<a 1-10 7µs",
			open:      1,
			uncertain: 1,
		},
		{
			// A loss on goroutine 2 leaves goroutine 1's calls alone.
			name: "loss on another goroutine",
			events: []*trace.Event{
				entry(1, "a", 0), afterLoss(entry(2, "b", 1)), entry(1, "c", 2), exit(1, "c", 3, 1), exit(1, "a", 4, 4),
			},
			want: "c<a 2-3 1µs, a 0-4 3µs",
			open: 1,
		},
		{
			name: "unpaired entry and usdtgen probe",
			events: []*trace.Event{
				{PID: 1, Goroutine: 1, Function: "a", Time: at(0)},
				{PID: 1, Provider: "p", Probe: "x", Time: at(1)},
			},
		},
		{
			name:   "still open",
			events: []*trace.Event{entry(1, "a", 0), entry(2, "a", 0), entry(2, "b", 1)},
			open:   3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var tree Tree
			tree.End = func(c *Call) { got = append(got, describe(c)) }
			for _, ev := range tt.events {
				tree.Add(ev)
			}
			if g := strings.Join(got, ", "); g != tt.want {
				t.Errorf("calls %q, want %q", g, tt.want)
			}
			if n := tree.Open(); n != tt.open {
				t.Errorf("%d calls open, want %d", n, tt.open)
			}
			if n, _ := tree.Lost(); n != tt.lost {
				t.Errorf("%d calls lost, want %d", n, tt.lost)
			}
			if n, _ := tree.Unwound(); n != tt.unwound {
				t.Errorf("%d calls unwound, want %d", n, tt.unwound)
			}
			if n, _ := tree.Uncertain(); n != tt.uncertain {
				t.Errorf("%d calls uncertain, want %d", n, tt.uncertain)
			}
		})
	}
}

// describe is a call as it ends: function<parent start-end self, and
// whether it is lost, unwound or uncertain.
func describe(c *Call) string {
	s := c.Function
	if c.Parent != nil {
		s += "<" + c.Parent.Function
	}
	us := func(x time.Time) int64 { return x.Sub(at(0)).Microseconds() }
	s = fmt.Sprintf("%s %d-%d %v", s, us(c.Start), us(c.End), c.Self())
	if c.Lost {
		s += " lost"
	}
	if c.Unwound {
		s += " unwound"
	}
	if c.Uncertain {
		s += " uncertain"
	}
	return s
}

// TestClose: the calls open when tracing ends end then, the innermost
// first and lost, so the calls they made that ended have a parent that
// ends too, around them.
func TestClose(t *testing.T) {
	var got []string
	tree := Tree{End: func(c *Call) { got = append(got, describe(c)) }}
	for _, ev := range []*trace.Event{entry(1, "a", 0), entry(1, "b", 1), entry(1, "c", 2), exit(1, "c", 4, 2), entry(2, "d", 3)} {
		tree.Add(ev)
	}
	if n := tree.Close(); n != 3 {
		t.Errorf("Close ended %d calls, want the 3 open", n)
	}
	// Goroutines in any order; a's self time (1 µs of 4) shows b ended first.
	slices.Sort(got[1:])
	if g, want := strings.Join(got, ", "), "c<b 2-4 2µs, a 0-4 1µs lost, b<a 1-4 1µs lost, d 3-3 0s lost"; g != want {
		t.Errorf("calls %q, want %q", g, want)
	}
	if n := tree.Open(); n != 0 {
		t.Errorf("%d calls open after Close", n)
	}
}

// TestLossTimesBounded: a Tree keeps the last loss of at most
// maxLossTimes goroutines with no call open; one it forgot counts as
// lost up to the latest it forgot, so that a call adopted after it is
// still a guess.
func TestLossTimesBounded(t *testing.T) {
	var tree Tree
	var c *Call
	tree.End = func(x *Call) {
		if x.Function == "c" {
			c = x
		}
	}
	// Goroutine 1's loss, at 1000, is the first of many goroutines'.
	tree.Add(afterLoss(entry(1, "d", 1000)))
	tree.Add(exit(1, "d", 1001, 1))
	for g := uint64(2); g < maxLossTimes+10; g++ {
		tree.Add(afterLoss(entry(g, "d", 1002)))
		tree.Add(exit(g, "d", 1003, 1))
	}
	if n := len(tree.lossAt); n > maxLossTimes {
		t.Errorf("the tree keeps the losses of %d goroutines, more than %d", n, maxLossTimes)
	}
	if _, kept := tree.lossAt[goroutine{1, 1}]; kept {
		t.Fatalf("goroutine 1's loss is still kept: the test does not reach the bound")
	}
	tree.Add(entry(1, "c", 2000))
	tree.Add(exitFrom(1, "a", 3000, 2500, 500))
	if c == nil || c.Parent == nil || c.Parent.Function != "a" || !c.Uncertain {
		t.Errorf("c ended as %+v, want adopted by a and uncertain", c)
	}
}

// TestAdopted: a call whose entry was not seen, and that began before the
// root open on its goroutine, becomes that root's parent, and Begin sees
// which call it adopted.
func TestAdopted(t *testing.T) {
	var adopted []string
	tree := Tree{Begin: func(c *Call) {
		if c.Adopted != nil {
			adopted = append(adopted, c.Function+" adopts "+c.Adopted.Function)
		}
	}}
	var a *Call
	tree.End = func(c *Call) {
		if c.Function == "a" {
			a = c
		}
	}
	for _, ev := range []*trace.Event{entry(1, "a", 500), entry(1, "b", 510), exit(1, "b", 520, 10), exit(1, "x", 600, 300)} {
		tree.Add(ev)
	}
	if g := strings.Join(adopted, ", "); g != "x adopts a" {
		t.Errorf("Begin saw %q, want x adopting a", g)
	}
	if a == nil || a.Parent == nil || a.Parent.Function != "x" {
		t.Errorf("a ended with the parent %v, want x", a.Parent)
	}
}

// TestOnThread checks that a usdtgen probe's event goes to the innermost
// call of the goroutine last seen on its thread.
func TestOnThread(t *testing.T) {
	var tree Tree
	tree.Add(&trace.Event{PID: 1, TID: 7, Goroutine: 1, Function: "a", Paired: true})
	tree.Add(&trace.Event{PID: 1, TID: 7, Goroutine: 1, Function: "b", Paired: true})
	tree.Add(&trace.Event{PID: 1, TID: 8, Goroutine: 2, Function: "c", Paired: true})
	if c := tree.OnThread(1, 7); c == nil || c.Function != "b" {
		t.Errorf("thread 7: %+v, want b", c)
	}
	if c := tree.OnThread(1, 9); c != nil {
		t.Errorf("thread 9: %+v, want none", c)
	}
	tree.Add(&trace.Event{PID: 1, TID: 8, Goroutine: 2, Function: "c", Exit: true})
	if c := tree.OnThread(1, 8); c != nil {
		t.Errorf("thread 8 after c returned: %+v, want none", c)
	}
}
