package e2e

// Tests of the calls' times: an exit probe that its clock's trampoline
// fired carries the start time the program read, and a call's span is
// where the program's clock puts it.

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nestSrc's calls nest: 4 goroutines make 100 requests each; request n
// calls step 2+n%3 times (1,199 in all) and then label; step i calls work
// with d = (n+i)%5, which takes d×10 µs, spinning for an even d and
// asleep for an odd one, when its goroutine may come back on another
// thread.
const nestSrc = `package main

import (
	"strconv"
	"time"
)

func work(d int) int {
	if d%2 == 1 {
		time.Sleep(time.Duration(d) * 10 * time.Microsecond)
		return d
	}
	spins := 0
	for end := time.Now().Add(time.Duration(d) * 10 * time.Microsecond); time.Now().Before(end); spins++ {
	}
	return spins
}

func step(n, i int) int { return work((n+i)%5) + i }

func label(n int) string { return "request " + strconv.Itoa(n) }

func request(n int) int {
	sum := 0
	for i := range 2 + n%3 {
		sum += step(n, i)
	}
	return sum + len(label(n))
}

func main() {
	done := make(chan bool)
	for g := range 4 {
		go func() {
			for n := g * 100; n < (g+1)*100; n++ {
				request(n)
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
}
`

// nestRules probe every function but main, step's exit in a deferred
// call: both ways of firing an exit probe go through the trampoline that
// reads the clock, but for label's, whose string result its fire function
// copies.
const nestRules = `provider: nest
rules:
  - package: example.com/nest
    func: step
    unwind: true
    inline: probe
  - package: example.com/nest
    exclude: [main, step]
    inline: probe
`

// nestCalls are the calls nestSrc makes; the exits of exact carry their
// start times.
var (
	nestCalls = map[string]int{"main.request": 400, "main.step": 1199, "main.work": 1199, "main.label": 400}
	exact     = map[string]bool{"main.request": true, "main.step": true, "main.work": true}
)

// timedEvent is an event of trace -json, with its times.
type timedEvent struct {
	Time      time.Time
	Function  string
	Goroutine uint64
	Args      map[string]any
	Results   map[string]any
	Elapsed   time.Duration `json:"elapsed_ns"`
	Start     time.Time
}

// timedCall is a call that trace -json shows, its events paired by the
// test.
type timedCall struct {
	entry, exit timedEvent
	parent      *timedCall
}

func (c *timedCall) end() time.Time { return c.exit.Start.Add(c.exit.Elapsed) }

// traceNest builds nestSrc, traces it with -json and args, and returns
// its calls in the order they returned.
func traceNest(t *testing.T, args ...string) []*timedCall {
	t.Helper()
	bin := buildMainRules(t, target{}, "nest", nestSrc, nestRules)
	out, errOut, err := usdtTrace(t, append(append([]string{"-json"}, args...), "--", bin)...)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	if strings.Contains(errOut, "usdt-toolexec trace:") {
		t.Fatalf("trace reported a problem (a lost event would unpair the calls):\n%s", errOut)
	}
	open := map[uint64][]*timedCall{}
	var calls []*timedCall
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e timedEvent
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("-json output does not parse: %v", err)
		}
		stack := open[e.Goroutine]
		if e.Results == nil {
			c := &timedCall{entry: e}
			if len(stack) > 0 {
				c.parent = stack[len(stack)-1]
			}
			open[e.Goroutine] = append(stack, c)
			continue
		}
		if len(stack) == 0 || stack[len(stack)-1].entry.Function != e.Function {
			t.Fatalf("goroutine %d: %s returned, but its open calls are %v", e.Goroutine, e.Function, stack)
		}
		c := stack[len(stack)-1]
		c.exit = e
		open[e.Goroutine] = stack[:len(stack)-1]
		calls = append(calls, c)
	}
	got := map[string]int{}
	for _, c := range calls {
		got[c.exit.Function]++
	}
	for fn, n := range nestCalls {
		if got[fn] != n {
			t.Errorf("trace -json shows %d returns of %s, want %d", got[fn], fn, n)
		}
	}
	return calls
}

// TestTraceSpanTimes checks the start times exit probes carry, over the
// 3,198 calls of nestSrc: the program read each after its entry probe
// fired and before the exit probe's, so it lies between their events; the
// calls a call made started after it and returned before it, by the
// program's clock; and work took as long as it was asked to at least.
func TestTraceSpanTimes(t *testing.T) {
	eachTransport(t, testSpanTimes)
}

func testSpanTimes(t *testing.T, transport string) {
	calls := traceNest(t, "-transport", transport)
	for _, c := range calls {
		x := c.exit
		if !exact[x.Function] {
			if !x.Start.IsZero() {
				t.Errorf("%s's exit carries a start time, %v, which its fire function cannot know", x.Function, x.Start)
			}
			continue
		}
		if x.Start.IsZero() {
			t.Errorf("%s's exit carries no start time", x.Function)
			continue
		}
		if x.Start.Before(c.entry.Time) || c.end().After(x.Time) {
			t.Errorf("%s ran [%v, %v], not between its entry's event at %v and its exit's at %v", x.Function, x.Start, c.end(), c.entry.Time, x.Time)
		}
		if p := c.parent; p != nil && (x.Start.Before(p.exit.Start) || c.end().After(p.end())) {
			t.Errorf("%s ran [%v, %v], not within %s's [%v, %v]", x.Function, x.Start, c.end(), p.exit.Function, p.exit.Start, p.end())
		}
		if x.Function == "main.work" {
			d, _ := c.entry.Args["d"].(float64)
			if x.Elapsed < time.Duration(d)*10*time.Microsecond {
				t.Errorf("work(%v) took %v, less than it spins or sleeps", d, x.Elapsed)
			}
		}
	}
}

// TestTraceOTLPSpanTimes sends nestSrc's calls to Jaeger and reads back
// its 400 traces: a span of a call whose exit carries its start time
// starts then and lasts the elapsed time, and every span lies within its
// parent's.
func TestTraceOTLPSpanTimes(t *testing.T) {
	eachTransport(t, testOTLPSpanTimes)
}

func testOTLPSpanTimes(t *testing.T, transport string) {
	j := startJaeger(t)
	calls := traceNest(t, "-transport", transport, "-otlp", j.otlp, "-service", "nest-e2e")
	type key struct {
		goroutine  uint64
		function   string
		startMicro int64
	}
	// Calls recorded in the process are fast enough to start in the
	// same microsecond on one goroutine (a work of 0.5 µs, then the next).
	byStart := map[key][]*timedCall{}
	for _, c := range calls {
		if !c.exit.Start.IsZero() {
			k := key{c.exit.Goroutine, c.exit.Function, c.exit.Start.UnixMicro()}
			byStart[k] = append(byStart[k], c)
		}
	}
	traces := j.traces(t, "nest-e2e", nestCalls["main.request"])
	for deadline := time.Now().Add(30 * time.Second); spanCount(traces) < len(calls) && time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		traces = j.traces(t, "nest-e2e", nestCalls["main.request"])
	}
	if n := spanCount(traces); len(traces) != nestCalls["main.request"] || n != len(calls) {
		t.Fatalf("Jaeger has %d traces of %d spans, want one per request, %d, of one span per call, %d", len(traces), n, nestCalls["main.request"], len(calls))
	}
	for id, tr := range traces {
		spans := map[string]jaegerSpan{}
		for _, s := range tr {
			spans[s.SpanID] = s
		}
		for _, s := range tr {
			p, ok := spans[s.parent()]
			if !ok {
				if s.OperationName != "main.request" {
					t.Errorf("trace %s: %s has no parent", id, s.OperationName)
				}
			} else if s.StartTime < p.StartTime || s.StartTime+s.Duration > p.StartTime+p.Duration+1 {
				// Jaeger keeps microseconds, start and duration cut
				// from nanoseconds each: an end may move by one.
				t.Errorf("trace %s: %s [%d, +%d] is not within %s [%d, +%d]", id, s.OperationName, s.StartTime, s.Duration, p.OperationName, p.StartTime, p.Duration)
			}
			if !exact[s.OperationName] {
				continue
			}
			g, _ := s.tag("goroutine")
			gid, _ := g.(float64)
			same := byStart[key{uint64(gid), s.OperationName, s.StartTime}]
			if len(same) == 0 {
				t.Errorf("trace %s: %s on goroutine %v starts at %d µs, when no call of trace -json started", id, s.OperationName, g, s.StartTime)
				continue
			}
			if !slices.ContainsFunc(same, func(c *timedCall) bool { return c.exit.Elapsed.Microseconds() == s.Duration }) {
				t.Errorf("trace %s: %s lasts %d µs, its exit probe measured %v", id, s.OperationName, s.Duration, same[0].exit.Elapsed)
			}
		}
	}
}

func spanCount(traces map[string][]jaegerSpan) int {
	n := 0
	for _, tr := range traces {
		n += len(tr)
	}
	return n
}

// nestCallers are the functions that call each of nestSrc's.
var nestCallers = map[string]string{"main.step": "main.request", "main.work": "main.step", "main.label": "main.request"}

// TestTraceOTLPLosses traces nestSrc through the smallest buffers, 4K,
// which lose events, through BPF's ring buffer and through the in-process
// ring, and reads its spans back from Jaeger: every span with a parent
// finds it in its own trace and lies within it, and one whose parent is
// not its caller (the calls it was taken to be in returned unseen) says
// its parent is uncertain, as trace's count at the end says of that many.
func TestTraceOTLPLosses(t *testing.T) {
	for _, tr := range []struct {
		name    string
		args    []string
		require func(*testing.T)
	}{
		{"bpf", []string{"-transport", "bpf"}, requireBPF},
		{"ring", []string{"-transport", "ring"}, requireRing},
	} {
		t.Run(tr.name, func(t *testing.T) {
			tr.require(t)
			testOTLPLosses(t, tr.args)
		})
	}
}

func testOTLPLosses(t *testing.T, transport []string) {
	j := startJaeger(t)
	bin := buildMainRules(t, target{}, "nest", nestSrc, nestRules)
	_, errOut, err := usdtTrace(t, append(transport, "-buffer", "4K", "-otlp", j.otlp, "-service", "nest-lost", "--", bin)...)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	if !regexp.MustCompile(`lost \d+ events: the (ring buffer|in-process ring) \(4K( per P)?\) was full`).MatchString(errOut) {
		// The loss message is the output under test: a 4K buffer
		// cannot hold the program's bursts.
		t.Fatalf("trace does not say that it lost events through a 4K buffer:\n%s", errOut)
	}
	uncertain := 0
	if m := regexp.MustCompile(`(\d+) calls on \d+ goroutines began after events of theirs were lost`).FindStringSubmatch(errOut); m != nil {
		uncertain, _ = strconv.Atoi(m[1])
	}
	// Jaeger takes the spans in batches: wait until it has them all.
	var traces map[string][]jaegerSpan
	for n, deadline := -1, time.Now().Add(30*time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		traces = j.traces(t, "nest-lost", 1)
		if spanCount(traces) == n {
			break
		}
		n = spanCount(traces)
	}
	marked, wrong, orphans := 0, 0, 0
	for id, tr := range traces {
		spans := map[string]jaegerSpan{}
		for _, s := range tr {
			spans[s.SpanID] = s
		}
		for _, s := range tr {
			_, isUncertain := s.tag("usdt.parent_uncertain")
			if isUncertain {
				marked++
			}
			if s.parent() == "" {
				continue
			}
			p, ok := spans[s.parent()]
			if !ok {
				orphans++
				t.Errorf("trace %s: %s's parent %s is not in its trace", id, s.OperationName, s.parent())
				continue
			}
			if s.StartTime < p.StartTime || s.StartTime+s.Duration > p.StartTime+p.Duration+1 {
				t.Errorf("trace %s: %s [%d, +%d] is not within %s [%d, +%d]", id, s.OperationName, s.StartTime, s.Duration, p.OperationName, p.StartTime, p.Duration)
			}
			if nestCallers[s.OperationName] != p.OperationName {
				wrong++
				if !isUncertain {
					t.Errorf("trace %s: %s is a child of %s, which never calls it, and its parent is not marked uncertain", id, s.OperationName, p.OperationName)
				}
			}
		}
	}
	if marked != uncertain {
		t.Errorf("%d spans are marked usdt.parent_uncertain, trace counted %d:\n%s", marked, uncertain, errOut)
	}
	t.Logf("%d spans in %d traces; %d under a function that does not call them, %d marked uncertain, %d whose parent is not in their trace\n%s", spanCount(traces), len(traces), wrong, marked, orphans, errOut)
}
