package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// procsProgram calls leaf from each of 16 goroutines, which yield now
// and then, so that with GOMAXPROCS at 16 every P runs some: 20,000
// times each, or with the argument "raise", 2,000 times each once it has
// raised its GOMAXPROCS to 16 and waited for the tracer's next polls
// (longer under emulation).
const procsProgram = `package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

func leaf(i int) int { return i + 1 }

func main() {
	calls := 20000
	if len(os.Args) > 1 && os.Args[1] == "raise" {
		runtime.GOMAXPROCS(16)
		slack, _ := strconv.Atoi(os.Getenv("` + tracetest.TimeSlackEnv + `"))
		time.Sleep(time.Duration(max(slack, 1)) * time.Second)
		calls = 2000
	}
	var wg sync.WaitGroup
	sums := make([]int, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				sums[g] += leaf(i)
				if i%100 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println("procs", runtime.GOMAXPROCS(0))
}
`

// TestRingGOMAXPROCS traces a program whose GOMAXPROCS (16) is above
// this machine's CPUs: the ring has a buffer for each of its Ps, and
// -stats counts every call, none lost to a P without one.
func TestRingGOMAXPROCS(t *testing.T) {
	requireRing(t)
	bin := buildMain(t, "procs", procsProgram)
	t.Setenv("GOMAXPROCS", "16")
	out, errOut, err := usdtTrace(t, "-transport", "ring", "-stats", "main.leaf", "--", bin)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "procs 16") {
		t.Fatalf("the program did not run with GOMAXPROCS 16:\n%s", errOut)
	}
	if got := statCounts(out)["main.leaf"]; got != 16*20000 || strings.Contains(errOut, "lost") {
		t.Errorf("trace counted %d calls of main.leaf, want %d, none lost:\n%s\n%s", got, 16*20000, out, errOut)
	}
}

// TestRingGOMAXPROCSRaised traces a program that raises its GOMAXPROCS
// to 16 once it runs, past the ring's first buffers (for 8 Ps): trace
// gives the new Ps buffers, or counters, at its next poll, and counts,
// or prints, every call after, none lost. A ring of events opened for 2
// Ps (32M each) has room for 8: trace says so, and that the others'
// events were lost for want of a buffer.
func TestRingGOMAXPROCSRaised(t *testing.T) {
	requireRing(t)
	bin := buildMain(t, "procs", procsProgram)
	const calls = 16 * 2000
	exits := func(out string) int { return strings.Count(out, `"probe":"exit__main__leaf"`) }
	for _, tc := range []struct {
		name, procs string
		args        []string
		// calls counts main.leaf's calls in trace's output.
		calls func(out string) int
		// room is what trace says of the ring's room, or "".
		room string
	}{
		{"stats", "2", []string{"-stats"}, func(out string) int { return statCounts(out)["main.leaf"] }, ""},
		{"events", "5", []string{"-json"}, exits, ""},
		{"events-no-room", "2", []string{"-json"}, exits, "raised GOMAXPROCS to 16, and its ring has room for the buffers of 8 Ps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.procs)
			args := append([]string{"-transport", "ring"}, tc.args...)
			out, errOut, err := usdtTrace(t, append(args, "main.leaf", "--", bin, "raise")...)
			if err != nil {
				t.Fatalf("trace: %v\n%s", err, errOut)
			}
			if !strings.Contains(errOut, "procs 16") {
				t.Fatalf("the program did not run with GOMAXPROCS 16:\n%s", errOut)
			}
			got := tc.calls(out)
			if tc.room == "" {
				if got != calls || strings.Contains(errOut, "lost") {
					t.Errorf("trace saw %d calls of main.leaf, want %d, none lost:\n%s", got, calls, errOut)
				}
				return
			}
			lost := regexp.MustCompile(`lost (\d+) events of Ps without a buffer in the ring`).FindStringSubmatch(errOut)
			if !strings.Contains(errOut, tc.room) || lost == nil {
				t.Fatalf("trace does not say that the ring had no room for every P, and what that lost:\n%s", errOut)
			}
			// Events: an entry and an exit a call.
			if n, _ := strconv.Atoi(lost[1]); 2*got+n != 2*calls || strings.Contains(errOut, "was full") {
				t.Errorf("trace saw %d calls of main.leaf and lost %d events of Ps without a buffer, want %d events in all, none lost to a full buffer:\n%s", got, n, 2*calls, errOut)
			}
		})
	}
}

// perProcess is what docs/tracing.md says trace holds of each process
// it traces at once, beside what it holds in all: under 512 KiB.
const perProcess = 512 << 10

// TestRingFamilyMemory traces, through the ring, a command that starts
// 50 probed children, all alive at once, each calling main.mark 1,000
// times: trace prints every call of each, and its peak memory is less
// than perProcess a child above its peak with one child.
func TestRingFamilyMemory(t *testing.T) {
	requireRing(t)
	bin := buildMain(t, "family", familyProgram)
	peak := map[int]int64{}
	for _, n := range []int{1, 50} {
		out, errOut, state, err := usdtTraceState(t, "-transport", "ring", "-json", "main.mark", "--", bin, "brood", strconv.Itoa(n))
		if err != nil {
			t.Fatalf("trace of %d children: %v\n%s", n, err, errOut)
		}
		calls := map[int]int{} // by process
		for _, e := range parseTraceJSON(t, out) {
			if e.Args != nil {
				calls[e.PID]++
			}
		}
		for pid, c := range calls {
			if c != 1000 {
				t.Errorf("%d children: process %d made %d calls, want 1000", n, pid, c)
			}
		}
		if len(calls) != n {
			t.Errorf("%d children: calls of %d processes", n, len(calls))
		}
		// The largest of trace and the processes it waited for (its
		// holder, and through it the command's), in KiB: trace's.
		peak[n] = state.SysUsage().(*syscall.Rusage).Maxrss << 10
		t.Logf("%d children: trace's peak resident memory %d KiB", n, peak[n]>>10)
	}
	if grown := peak[50] - peak[1]; grown > 49*perProcess {
		t.Errorf("trace's peak memory grew by %d KiB from 1 child to 50, more than %d KiB a child", grown>>10, perProcess>>10)
	}
}
