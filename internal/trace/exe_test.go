package trace

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/go-usdt/usdt/internal/metrics"
)

// TestLineWriter: writers that share a lock write whole lines, however
// their writes cut them, and Flush writes the rest.
func TestLineWriter(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &lineWriter{mu: &mu, w: &out}
			line := strings.Repeat(string(rune('a'+w)), 50) + "\n"
			for range 200 {
				l.Write([]byte(line[:17]))
				l.Write([]byte(line[17:]))
			}
			l.Write([]byte("tail"))
			l.Flush()
		}()
	}
	wg.Wait()
	text := out.String()
	if n := strings.Count(text, "tail"); n != 4 {
		t.Errorf("%d tails, want 4", n)
	}
	for _, l := range strings.Split(strings.ReplaceAll(text, "tail", ""), "\n") {
		if l != "" && (len(l) != 50 || strings.Count(l, l[:1]) != 50) {
			t.Fatalf("a torn line: %q", l)
		}
	}
}

// TestExeCounts adds up the counts of -exe's processes as they come and
// go: a process's latest counts replace its earlier ones, an ended
// process's last counts stay in the sum, so that the calls never go
// down as a service restarts, and Processes counts those that run.
func TestExeCounts(t *testing.T) {
	var got []*metrics.Snapshot
	c := &exeCounts{live: map[int]*metrics.Snapshot{}, out: func(s *metrics.Snapshot) { got = append(got, s) }}
	snap := func(calls uint64, processes int) *metrics.Snapshot {
		return &metrics.Snapshot{Processes: processes, Functions: []metrics.Function{{Name: "main.work", Calls: calls}}}
	}
	steps := []struct {
		do        func()
		calls     uint64
		processes int
	}{
		{func() { c.update(10, snap(5, 1)) }, 5, 1},
		{func() { c.update(10, snap(8, 1)) }, 8, 1},  // a later read of the same process
		{func() { c.update(11, snap(2, 2)) }, 10, 3}, // a second, with a child
		{func() { c.update(10, snap(9, 0)) }, 11, 2}, // 10's last read, at its end
		{func() { c.end(10) }, 11, 2},                // 10 ended: its 9 calls stay
		{func() { c.update(12, snap(1, 1)) }, 12, 3}, // the restart
		{func() { c.end(11) }, 12, 1},                // 11 ended without a last read
		{func() { c.end(99) }, 12, 1},                // one never traced
	}
	for i, st := range steps {
		st.do()
		last := got[len(got)-1]
		var calls uint64
		for _, fn := range last.Functions {
			if fn.Name == "main.work" {
				calls = fn.Calls
			}
		}
		if calls != st.calls || last.Processes != st.processes {
			t.Errorf("step %d: %d calls of %d processes, want %d of %d", i, calls, last.Processes, st.calls, st.processes)
		}
	}
}
