package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// statsSrc calls its functions a known number of times: fast 10,000 times
// from four goroutines, nap three times for 20 ms, fib recursively
// 2*F(13)-1 = 465 times, and counted, which has only an entry probe, 7
// times.
const statsSrc = `package main

import (
	"fmt"
	"sync"
	"time"
)

func fast(i int) int { return i + 1 }

func nap(d time.Duration) { time.Sleep(d) }

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func counted(i int) int { return i }

func main() {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2500 {
				fast(i + g)
			}
		}()
	}
	wg.Wait()
	for range 3 {
		nap(20 * time.Millisecond)
	}
	fmt.Println(fib(12))
	for i := range 7 {
		counted(i)
	}
}
`

// statsRules probes every function but main, those the compiler inlines
// too (fast, nap and counted), as rules do by default.
const statsRules = `provider: stats
rules:
  - package: example.com/stats
    func: counted
    probes: [entry]
  - package: example.com/stats
    exclude: [main, counted]
`

// statsWant are the calls statsSrc makes.
var statsWant = map[string]uint64{"main.fast": 10000, "main.nap": 3, "main.fib": 465, "main.counted": 7}

// funcStat is one function's block of trace -stats, text or JSON.
type funcStat struct {
	Function  string
	Provider  string
	Probe     string
	Calls     uint64
	TotalNs   uint64 `json:"total_ns"`
	MeanNs    uint64 `json:"mean_ns"`
	Histogram []statBucket
}

type statBucket struct {
	Lo    int64 `json:"lo_ns"`
	Hi    int64 `json:"hi_ns"`
	Count uint64
}

var (
	statHead = regexp.MustCompile(`^(\S+): (\d+) calls(?:, total (\S+), mean (\S+))?$`)
	statRow  = regexp.MustCompile(`^  \[(\S+), (\S+)\) +(\d+) \|@* *\|$`)
)

// parseStats parses the blocks of trace -stats's text output.
func parseStats(t *testing.T, out string) []funcStat {
	t.Helper()
	var all []funcStat
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		if m := statHead.FindStringSubmatch(line); m != nil {
			fs := funcStat{Function: m[1], Calls: atou(t, m[2])}
			if m[3] != "" {
				fs.TotalNs, fs.MeanNs = uint64(parseDuration(t, m[3])), uint64(parseDuration(t, m[4]))
			}
			all = append(all, fs)
			continue
		}
		m := statRow.FindStringSubmatch(line)
		if m == nil || len(all) == 0 {
			t.Fatalf("-stats printed %q, neither a function's line nor a histogram's:\n%s", line, out)
		}
		h := &all[len(all)-1].Histogram
		*h = append(*h, statBucket{int64(parseDuration(t, m[1])), int64(parseDuration(t, m[2])), atou(t, m[3])})
	}
	return all
}

func atou(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func parseDuration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parseStatsJSON(t *testing.T, out string) []funcStat {
	t.Helper()
	var all []funcStat
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var fs funcStat
		if err := json.Unmarshal([]byte(line), &fs); err != nil {
			t.Fatalf("-stats -json printed %q: %v", line, err)
		}
		all = append(all, fs)
	}
	return all
}

// TestTraceStats counts the calls of statsSrc with trace -stats, attached
// each way: exactly as many as it makes, each timed call in one bucket of
// its function's histogram, the sleeping function's in buckets that hold
// 20 ms or more, and the functions sorted by their total time.
func TestTraceStats(t *testing.T) {
	requireAMD64(t)
	bin := buildMainRules(t, target{}, "stats", statsSrc, statsRules)
	// BPF through each way to attach, and the ring.
	for _, attach := range []string{"multi", "single", "ring"} {
		for _, format := range []string{"text", "json"} {
			if format == "json" && guestDir != "" {
				continue // the same counts, formatted by trace
			}
			t.Run(attach+"-"+format, func(t *testing.T) {
				args := []string{"-v", "-stats", "-attach", attach}
				if attach == "ring" {
					requireRing(t)
					args = []string{"-v", "-stats", "-transport", "ring"}
				} else {
					requireBPF(t)
				}
				if format == "json" {
					args = append(args, "-json")
				}
				out, errOut, err := usdtTrace(t, append(args, "--", bin)...)
				if err != nil {
					if attach == "multi" && strings.Contains(errOut, "no uprobe_multi link") {
						t.Skipf("this kernel makes no uprobe_multi link (Linux 6.6+ does): %s", errOut)
					}
					t.Fatalf("trace: %v\n%s", err, errOut)
				}
				if !strings.Contains(errOut, "\n144\n") && !strings.HasPrefix(errOut, "144\n") {
					t.Errorf("the program's output (fib(12) = 144) is missing:\n%s", errOut)
				}
				stats := parseStatsJSON
				if format == "text" {
					stats = parseStats
				}
				checkStats(t, stats(t, out), out)
			})
		}
	}
}

func checkStats(t *testing.T, all []funcStat, out string) {
	t.Helper()
	got := map[string]uint64{}
	for i, fs := range all {
		got[fs.Function] = fs.Calls
		var inHist uint64
		for _, b := range fs.Histogram {
			inHist += b.Count
			if fs.Function == "main.nap" && (b.Lo < int64(16*time.Millisecond) || b.Hi > int64(time.Second)) {
				t.Errorf("main.nap, which sleeps 20 ms, has calls in [%v, %v)", time.Duration(b.Lo), time.Duration(b.Hi))
			}
		}
		switch {
		case fs.Function == "main.counted" && (fs.Histogram != nil || fs.TotalNs != 0):
			t.Errorf("main.counted has only an entry probe, yet a time: %+v", fs)
		case fs.Function != "main.counted" && inHist != fs.Calls:
			t.Errorf("%s: %d calls, %d in its histogram", fs.Function, fs.Calls, inHist)
		}
		if fs.Function == "main.nap" && fs.TotalNs < uint64(60*time.Millisecond) {
			t.Errorf("main.nap's 3 calls of 20 ms took %v in all", time.Duration(fs.TotalNs))
		}
		if i > 0 && fs.TotalNs > all[i-1].TotalNs {
			t.Errorf("%s (%v) comes after %s (%v): want the longest total first", fs.Function, time.Duration(fs.TotalNs), all[i-1].Function, time.Duration(all[i-1].TotalNs))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(statsWant) {
		t.Errorf("calls per function %v, want %v:\n%s", got, statsWant, out)
	}
}

// ticksProgram ticks 100 times, every 10 ms.
const ticksProgram = `package main

import "time"

func tick(i int) int { return i }

func main() {
	for i := range 100 {
		tick(i)
		time.Sleep(10 * time.Millisecond)
	}
}
`

// TestTraceStatsInterval prints the counts every 200 ms of a program that
// ticks for about a second: several intervals, whose counts add up to the
// ticks.
func TestTraceStatsInterval(t *testing.T) {
	requireAMD64(t)
	bin := buildMain(t, "ticks", ticksProgram)
	eachTransport(t, func(t *testing.T, transport string) { testStatsInterval(t, bin, transport) })
}

func testStatsInterval(t *testing.T, bin, transport string) {
	out, errOut, err := usdtTrace(t, "-transport", transport, "-stats", "-interval", "200ms", "--", bin)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	header := regexp.MustCompile(`^--- \d\d:\d\d:\d\d, \S+ ---$`)
	var intervals, calls uint64
	for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
		head, rest, _ := strings.Cut(block, "\n")
		if !header.MatchString(head) {
			t.Fatalf("an interval starts with %q, want --- TIME, LENGTH ---:\n%s", head, out)
		}
		intervals++
		for _, fs := range parseStats(t, rest) {
			if fs.Function != "main.tick" {
				t.Errorf("-stats counted %s", fs.Function)
			}
			calls += fs.Calls
		}
	}
	// Counts since the start would add up to far more.
	if calls != 100 || intervals < 4 {
		t.Errorf("%d intervals counted %d ticks, want 100 in 4 or more:\n%s", intervals, calls, out)
	}
}

// TestTraceStatsProvider counts the fires of the provider example's
// probes, which carry no time: one count per probe, through BPF and
// through the in-process ring (built with cgo: its semaphores are C's).
func TestTraceStatsProvider(t *testing.T) {
	requireAMD64(t)
	for _, tc := range []struct {
		transport string
		route     route
		require   func(*testing.T)
	}{
		{"bpf", routeA, requireBPF},
		{"ring", routeC, requireRing},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			tc.require(t)
			bin := buildJobs(tc.route)(t)
			out, errOut, err := usdtTrace(t, "-transport", tc.transport, "-stats", "-json", "--", bin, "-jobs", "20", "-every", "1ms")
			if err != nil {
				t.Fatalf("trace: %v\n%s", err, errOut)
			}
			got := map[string]uint64{}
			for _, fs := range parseStatsJSON(t, out) {
				if fs.Provider != "jobs" || fs.Histogram != nil {
					t.Errorf("-stats printed %+v, want counts of provider jobs' probes", fs)
				}
				got[fs.Probe] = fs.Calls
			}
			want := map[string]uint64{"job__enqueued": 20, "job__started": 20, "job__done": 20}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("fires per probe %v, want %v:\n%s", got, want, out)
			}
		})
	}
}
