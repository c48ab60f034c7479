package e2e

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/ringlayout"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// The tests of the in-process ring transport (package ring): the probes
// write their events into the program's memory, and usdt-toolexec trace
// reads them as the user who runs the program.

// requireRing skips where the trampolines do not write to the ring.
func requireRing(t *testing.T) {
	t.Helper()
	requireAMD64(t)
}

// eachTransport runs f as a subtest for each of trace's transports, BPF
// and the in-process ring, each skipped where it cannot trace.
func eachTransport(t *testing.T, f func(t *testing.T, transport string)) {
	t.Helper()
	for _, transport := range []string{"bpf", "ring"} {
		t.Run(transport, func(t *testing.T) {
			if transport == "bpf" {
				requireBPF(t)
			} else {
				requireRing(t)
			}
			f(t, transport)
		})
	}
}

// ringStats matches a function's count in trace -stats's output.
var ringStats = regexp.MustCompile(`(?m)^(main\.\w+): (\d+) calls`)

// The calls of nap in all, as the fixture timed them and as trace -stats
// totals them.
var (
	napped   = regexp.MustCompile(`napped=(\d+)`)
	napTotal = regexp.MustCompile(`(?m)^main\.nap: \d+ calls, total (\S+),`)
)

func statCounts(out string) map[string]int {
	counts := map[string]int{}
	for _, m := range ringStats.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		counts[m[1]] = n
	}
	return counts
}

// TestRingStatsUnprivileged runs trace -stats -- CMD as nobody, without
// -transport: BPF needs root, so trace records in the process, and counts
// every call exactly, with GOMAXPROCS changing or not. It times the calls
// of nap, which sleeps 3 ms, as the program does.
func TestRingStatsUnprivileged(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	as := asNobody(t, bin)
	for _, tc := range []struct {
		name     string
		patterns []string
		args     []string
		want     map[string]int
	}{
		{"4 goroutines", nil, []string{"-g", "4", "-nap", "3ms", "100000"}, map[string]int{"main.add": 400000, "main.wide": 4000, "main.note": 4000, "main.work": 4, "main.nap": 4}},
		{"GOMAXPROCS changing", nil, []string{"-g", "3", "-procs", "20000"}, map[string]int{"main.add": 60000, "main.wide": 600, "main.note": 600, "main.work": 3}},
		// add's calls counted at its entry, its exit left out: the
		// entry's trampoline must call the writer.
		{"an entry without its exit", []string{"ring:entry__main__add", "ring:*wide"}, []string{"-g", "2", "1000"}, map[string]int{"main.add": 2000, "main.wide": 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"trace", "-v", "-stats"}, tc.patterns...), "--", "PROG")
			out, err := as(append(args, tc.args...)...)
			if err != nil {
				t.Fatalf("trace as nobody: %v\n%s", err, out)
			}
			if !strings.Contains(out, "transport ring: BPF needs root") {
				t.Errorf("-v does not say that it records in the process, and why:\n%s", out)
			}
			if got := statCounts(out); !maps.Equal(got, tc.want) {
				t.Errorf("counted %v, want %v:\n%s", got, tc.want, out)
			}
			if strings.Contains(out, "lost") {
				t.Errorf("trace lost calls:\n%s", out)
			}
			if m, n := napTotal.FindStringSubmatch(out), napped.FindStringSubmatch(out); m != nil && n != nil {
				total, err := time.ParseDuration(m[1])
				ns, _ := strconv.ParseInt(n[1], 10, 64)
				// The fixture's times hold the probes' own work too,
				// which emulation (the VMs' TCG) makes slow.
				tolerance := int64(20)
				if tracetest.TimeSlack > 1 {
					tolerance = 5
				}
				if diff := (total - time.Duration(ns)).Abs(); err != nil || diff > time.Duration(ns/tolerance) {
					t.Errorf("trace timed nap's calls at %s in all, the fixture at %s: want within 1/%d:\n%s", m[1], time.Duration(ns), tolerance, out)
				}
			} else if tc.want["main.nap"] > 0 {
				t.Errorf("no total of nap's calls from trace, or from the fixture:\n%s", out)
			}
		})
	}
}

// TestRingProviderUnprivileged traces the provider example's usdtgen
// probes as nobody, without -transport: trace records them in the
// process, counts every fire, and prints each job's events with their
// strings.
func TestRingProviderUnprivileged(t *testing.T) {
	requireRing(t)
	as := asNobody(t, buildJobs(routeA)(t))
	out, err := as("trace", "-v", "-stats", "--", "PROG", "-jobs", "20", "-every", "1ms")
	if err != nil {
		t.Fatalf("trace -stats as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(out, "transport ring: BPF needs root") {
		t.Errorf("-v does not say that it records in the process, and why:\n%s", out)
	}
	for _, p := range []string{"enqueued", "started", "done"} {
		if !strings.Contains(out, "jobs:job__"+p+": 20 calls\n") {
			t.Errorf("-stats does not count 20 fires of job__%s:\n%s", p, out)
		}
	}
	out, err = as("trace", "-json", "jobs:job__done", "--", "PROG", "-jobs", "20", "-every", "1ms")
	if err != nil {
		t.Fatalf("trace -json as nobody: %v\n%s", err, out)
	}
	ids := map[float64]bool{}
	for _, line := range strings.Split(out, "\n") {
		var e struct {
			Probe string
			Args  struct {
				ID   float64
				Kind string
			}
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue // the program's own lines
		}
		if e.Probe != "job__done" || e.Args.Kind == "" {
			t.Errorf("event %s: want job__done with its kind", line)
		}
		ids[e.Args.ID] = true
	}
	if len(ids) != 20 {
		t.Errorf("job__done for %d jobs, want 20:\n%s", len(ids), out)
	}
}

// TestRingChildrenUnprivileged traces, as nobody, a command that starts
// the same binary again, directly and through a shell: trace follows it
// into those processes, counts their calls with the command's, and shows
// their events with their own process ids.
func TestRingChildrenUnprivileged(t *testing.T) {
	requireRing(t)
	as := asNobody(t, buildMain(t, "family", familyProgram))
	for _, tc := range []struct {
		who  string
		want map[string]int // calls of main.mark by each caller
	}{
		{"parent", map[string]int{"parent": 2, "child": 2}},
		{"shell", map[string]int{"shell": 1, "child": 2}},
	} {
		t.Run(tc.who, func(t *testing.T) {
			out, err := as("trace", "-v", "-stats", "main.mark", "--", "PROG", tc.who)
			if err != nil {
				t.Fatalf("trace -stats as nobody: %v\n%s", err, out)
			}
			total := 0
			for _, n := range tc.want {
				total += n
			}
			if got := statCounts(out)["main.mark"]; got != total || !strings.Contains(out, "transport ring") {
				t.Errorf("trace -stats counted %d calls of main.mark through the ring, want %d:\n%s", got, total, out)
			}
			if !strings.Contains(out, "which the command started") {
				t.Errorf("-v does not say that trace attached to the child:\n%s", out)
			}
			out, err = as("trace", "-json", "main.mark", "--", "PROG", tc.who)
			if err != nil {
				t.Fatalf("trace -json as nobody: %v\n%s", err, out)
			}
			// The command's stderr comes with the events: the lines of
			// JSON are the events.
			var events strings.Builder
			for _, line := range strings.SplitAfter(out, "\n") {
				if strings.HasPrefix(line, "{") {
					events.WriteString(line)
				}
			}
			calls, pids := map[string]int{}, map[string]map[int]bool{}
			for _, e := range parseTraceJSON(t, events.String()) {
				if len(e.Args) != 2 {
					continue
				}
				who, _ := e.Args[0].Value.(string)
				calls[who]++
				if pids[who] == nil {
					pids[who] = map[int]bool{}
				}
				pids[who][e.PID] = true
			}
			if !maps.Equal(calls, tc.want) || len(pids["child"]) != 1 || pids["child"][firstKey(pids[tc.who])] {
				t.Errorf("main.mark's events by caller %v in processes %v, want %v, the child's in a process of its own:\n%s", calls, pids, tc.want, out)
			}
		})
	}
}

func firstKey[K comparable, V any](m map[K]V) K {
	for k := range m {
		return k
	}
	var zero K
	return zero
}

// asNobody copies usdt-toolexec and bin where nobody can run them, and
// returns a function that runs usdt-toolexec as nobody (setpriv), PROG
// in its arguments standing for the copy of bin.
func asNobody(t *testing.T, bin string) func(args ...string) (string, error) {
	t.Helper()
	run, _ := asNobodyIn(t, bin)
	return run
}

// asNobodyIn is asNobody, and returns the directory the commands run in,
// which holds the copy of bin, for others beside it.
func asNobodyIn(t *testing.T, bin string) (run func(args ...string) (string, error), dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the test becomes nobody with setpriv, which needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		tracetest.SkipMissing(t, "setpriv (util-linux) is not installed: cannot run trace as nobody (scripts/setup.sh)")
	}
	dir = tracetest.NobodyDir(t)
	tool, prog := filepath.Join(dir, "usdt-toolexec"), filepath.Join(dir, filepath.Base(bin))
	copyFile(t, filepath.Join(toolsDir, "usdt-toolexec"), tool)
	copyFile(t, bin, prog)
	return func(args ...string) (string, error) {
		for i, a := range args {
			if a == "PROG" {
				args[i] = prog
			}
		}
		cmd := exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", tool}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}, dir
}

// TestRingEvents traces the fixture's calls through the ring and through
// BPF: the same events with the same values, the wide function's
// arguments past the registers and note's string included, each
// goroutine's complete.
func TestRingEvents(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	events := func(transport string) []string {
		out, errOut, err := usdtTrace(t, "-transport", transport, "--", bin, "-g", "2", "300")
		if err != nil {
			t.Fatalf("trace -transport %s: %v\n%s", transport, err, errOut)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			// Without the time, and the elapsed time of exits.
			_, l, _ = strings.Cut(l, " ")
			if i := strings.LastIndex(l, ") "); i >= 0 && strings.Contains(l, " = (") {
				l = l[:i+1]
			}
			lines = append(lines, l)
		}
		return lines
	}
	ringEvents := events("ring")
	perGoroutine := map[string]int{}
	for _, l := range ringEvents {
		g, _, _ := strings.Cut(l, " ")
		perGoroutine[g]++
	}
	if len(perGoroutine) != 2 {
		t.Errorf("the ring's events come from goroutines %v, want 2 goroutines' %d each", perGoroutine, 2*(300+3+3+1))
	}
	for g, n := range perGoroutine {
		if n != 2*(300+3+3+1) {
			t.Errorf("goroutine %s has %d events, want %d", g, n, 2*(300+3+3+1))
		}
	}
	// Per goroutine: 300 calls of add, 3 of wide and of note, 1 of
	// work, each an entry and an exit.
	if n, want := len(ringEvents), 2*2*(300+3+3+1); n != want {
		t.Errorf("the ring gave %d events, want %d:\n%s", n, want, strings.Join(ringEvents, "\n"))
	}
	for _, want := range []string{"main.wide(a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9, j=200)", "main.wide = (r1=245)", "main.add(a=299, b=1)", "main.add = (r1=300)", `main.note(s="w200")`, "main.note = (r1=4)"} {
		if !strings.Contains(strings.Join(ringEvents, "\n"), want) {
			t.Errorf("no event %q through the ring:\n%s", want, strings.Join(ringEvents, "\n"))
		}
	}
	// -json's tid: the thread each event fired on, as the program's M
	// knows it.
	out, errOut, err := usdtTrace(t, "-json", "-transport", "ring", "--", bin, "-g", "2", "300")
	if err != nil {
		t.Fatalf("trace -json: %v\n%s", err, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct{ PID, TID int }
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.TID == 0 || ev.PID == 0 {
			t.Fatalf("an event without its process and thread (%v): %s", err, l)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the comparison with the BPF transport needs root")
	}
	requireBPF(t)
	// Goroutine ids differ from run to run (each P hands out its own
	// batch). work's stop is a pointer, whose value both copy.
	comparable := func(events []string) []string {
		var out []string
		for _, l := range events {
			_, l, _ = strings.Cut(l, " ")
			out = append(out, l)
		}
		return out
	}
	if bpfEvents := events("bpf"); !sameMultiset(comparable(ringEvents), comparable(bpfEvents)) {
		t.Errorf("the ring's events differ from BPF's:\nring:\n%s\nbpf:\n%s", strings.Join(ringEvents, "\n"), strings.Join(bpfEvents, "\n"))
	}
}

// TestRingEventsInOrder traces goroutines that GOMAXPROCS's changes move
// from P to P, each P writing its own buffer: trace prints each
// goroutine's events in the order they happened, calls nested, times
// rising.
func TestRingEventsInOrder(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	out, errOut, err := usdtTrace(t, "-transport", "ring", "--", bin, "-g", "3", "-procs", "3000")
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	type state struct {
		calls []string
		last  string
	}
	goroutines := map[string]*state{}
	events := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		events++
		tm, g, call := f[0], f[1], f[2]
		st := goroutines[g]
		if st == nil {
			st = &state{}
			goroutines[g] = st
		}
		if tm < st.last {
			t.Fatalf("%s's events go back in time at %q (after %s)", g, l, st.last)
		}
		st.last = tm
		fn, _, _ := strings.Cut(call, "(")
		if len(f) > 3 && f[3] == "=" {
			if n := len(st.calls); n == 0 || st.calls[n-1] != fn {
				t.Fatalf("%s: %q returns from %s, but the open calls are %v", g, l, fn, st.calls)
			}
			st.calls = st.calls[:len(st.calls)-1]
		} else {
			st.calls = append(st.calls, fn)
		}
	}
	if want := 2 * 3 * (3000 + 30 + 30 + 1); events != want || len(goroutines) != 3 {
		t.Errorf("%d events of %d goroutines, want %d of 3:\n%s", events, len(goroutines), want, errOut)
	}
}

// sameMultiset reports whether a and b hold the same lines as many times:
// the two traces' goroutines interleave differently.
func sameMultiset(a, b []string) bool {
	n := map[string]int{}
	for _, s := range a {
		n[s]++
	}
	for _, s := range b {
		n[s]--
	}
	for _, v := range n {
		if v != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

// TestRingBufferFull traces 100,000 calls through the smallest buffer:
// what did not fit is counted, and the events printed and the events lost
// add up to every call's two.
func TestRingBufferFull(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	out, errOut, err := usdtTrace(t, "-transport", "ring", "-buffer", "4K", "main.add", "--", bin, "100000")
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	m := regexp.MustCompile(`lost (\d+) events: the in-process ring \(4K per P\) was full`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("trace did not count what it lost:\n%s", errOut)
	}
	lost, _ := strconv.Atoi(m[1])
	printed := strings.Count(out, " main.add")
	// Every call writes two events, entry and exit, to the buffer, or
	// counts them lost, wide's too, whose entry shares the check.
	if printed+lost < 2*100000 || printed+lost > 2*(100000+1000) {
		t.Errorf("%d events printed and %d lost, want 200,000 of add's in all (and at most wide's 2,000 more)", printed, lost)
	}
}

// TestRingBlock traces TestRingBufferFull's 100,000 calls through the
// same smallest buffer, with -block: a probe that finds its buffer full
// waits for trace to read, and every event is printed, none lost. Then,
// with trace stopped (SIGSTOP) while a program on one P calls add in a
// loop, a probe waits for room that does not come, longer (-block 10s)
// than the tracer's lease (1 s): it sees the lease run out as it waits
// and takes the probes down, so that the semaphores' slots are back at 0
// within 2 s, and the program goes on and ends its calls when told.
func TestRingBlock(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	t.Run("every event", func(t *testing.T) {
		calls := 100000
		if tracetest.TimeSlack > 1 {
			calls = 10000
		}
		out, errOut, err := usdtTrace(t, "-transport", "ring", "-buffer", "4K", "-block", "1s", "main.add", "--", bin, strconv.Itoa(calls))
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, errOut)
		}
		if strings.Contains(errOut, "lost") {
			t.Errorf("trace -block lost events:\n%s", errOut)
		}
		if printed := strings.Count(out, " main.add"); printed != 2*calls {
			t.Errorf("trace -block printed %d events of add, want every call's two, %d:\n%s", printed, 2*calls, errOut)
		}
		if !strings.Contains(errOut, fmt.Sprintf("add=%d ", calls)) {
			t.Errorf("the program did not make its calls:\n%s", errOut)
		}
	})
	t.Run("tracer stopped", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "1")
		prog, stdin, out := startReady(t, bin, "-wait", "0")
		fmt.Fprintln(stdin) // it calls until the next line
		pid := prog.Process.Pid
		tr, _, _ := traceAttached(t, io.Discard, "-v", "-transport", "ring", "-buffer", "4K", "-block", "10s", "-p", strconv.Itoa(pid), "main.add")
		sems := semaphores(t, bin)
		waitFor(t, 5*time.Second, "the probes on", func() bool { return slices.Contains(readUints(t, pid, sems, 4), 1<<16) })
		time.Sleep(300 * time.Millisecond)
		if err := tr.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		defer func() { tr.Process.Signal(syscall.SIGCONT); tr.Process.Kill(); tr.Wait() }()
		// The lease runs out 1 s after the tracer last renewed it.
		semaphoresOff(t, pid, sems, 4, stopped)
		t.Logf("the program turned its probes off %v after its tracer stopped", time.Since(stopped).Round(time.Millisecond))
		fmt.Fprintln(stdin)
		line, _ := out.ReadString('\n')
		if err := prog.Wait(); err != nil || !strings.HasPrefix(line, "add=") {
			t.Fatalf("the program printed %q: %v", line, err)
		}
	})
}

// TestRingBlockOutputStalled traces add with -block 500ms, its output
// into a pipe that nothing reads: trace fills its backlog of events to
// print (128 MB), then stops taking records from the ring, while it
// renews its lease. A probe on the program's one P waits once for room,
// then drops at once as long as trace has read nothing since: in 8 s
// the program makes far more calls (over 5 million) than trace's
// backlog and the ring hold (160 MB, two records of 48 bytes a call:
// 1.75 million calls), where a wait at every event would add 16 (with
// that wait, 1.8 million here; without it, 81 million).
func TestRingBlockOutputStalled(t *testing.T) {
	requireRing(t)
	if tracetest.TimeSlack > 1 {
		t.Skip("the count of calls it checks is a native machine's")
	}
	bin := buildFixtureRules(t, "ring")
	t.Setenv("GOMAXPROCS", "1")
	prog, stdin, out := startReady(t, bin, "-wait", "0")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr, _, _ := traceAttached(t, w, "-v", "-transport", "ring", "-block", "500ms", "-p", strconv.Itoa(prog.Process.Pid), "main.add")
	w.Close()
	defer func() { tr.Process.Kill(); tr.Wait() }()
	fmt.Fprintln(stdin) // it calls until the next line
	time.Sleep(8 * time.Second)
	if on := readUints(t, prog.Process.Pid, semaphores(t, bin), 4); !slices.Contains(on, 1<<16) {
		t.Fatalf("the probes went off (%#x): trace's lease ran out", on)
	}
	fmt.Fprintln(stdin)
	line, _ := out.ReadString('\n')
	if err := prog.Wait(); err != nil {
		t.Fatalf("the program printed %q: %v", line, err)
	}
	var adds int
	if _, err := fmt.Sscanf(line, "add=%d ", &adds); err != nil || adds < 5000000 {
		t.Errorf("the program printed %q, want more than 5,000,000 calls of add: its probes waited at every event", line)
	}
	t.Logf("the program printed %q", strings.TrimSpace(line))
}

// TestRingKilledTracer kills a ring trace with SIGKILL: within two
// seconds the program turns the probes it turned on off by itself, its
// semaphores back at zero, and a second trace attaches and counts.
// Beside bpftrace, attached to one of the same probes, the program
// takes down only what the ring trace raised: that probe's semaphore
// goes back to bpftrace's count, not to zero, bpftrace counts every call
// after the kill, and so does a second ring trace.
func TestRingKilledTracer(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	t.Run("alone", func(t *testing.T) { killedTracerAlone(t, bin, "-stats") })
	// A trace that has the program sample (every call left out, and
	// counted in the program): its writer checks the lease as well.
	t.Run("alone, the program sampling", func(t *testing.T) {
		requireAMD64(t)
		killedTracerAlone(t, bin, "-otlp", fmt.Sprintf("http://127.0.0.1:%d", freePorts(t, 1)[0]), "-sample", "0")
	})
	t.Run("beside bpftrace", func(t *testing.T) {
		requireBPF(t)
		eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
			bt.RequireAttach(t)
			killedTracerBesideBpftrace(t, bt, bin)
		})
	})
}

// killedTracerAlone kills a ring trace of the ring fixture, bin, asked
// for with args, while the program calls.
func killedTracerAlone(t *testing.T, bin string, args ...string) {
	prog, stdin, _ := startReady(t, bin, "-wait", "0")
	fmt.Fprintln(stdin) // it calls until the next line
	pid := strconv.Itoa(prog.Process.Pid)

	tr, _, _ := traceAttached(t, io.Discard, append(append([]string{"-v", "-transport", "ring"}, args...), "-p", pid)...)
	// The tracer's flag is the high half of each probe's slot; the low
	// half, the semaphore the notes name, is the kernel's.
	sems := semaphores(t, bin)
	if on := readUints(t, prog.Process.Pid, sems, 4); !allAre(on, 1<<16) {
		t.Fatalf("the semaphores' slots are %#x while traced, want all 0x10000", on)
	}
	tr.Process.Kill()
	tr.Wait()
	killed := time.Now()
	semaphoresOff(t, prog.Process.Pid, sems, 4, killed)
	t.Logf("the program turned its probes off %v after the tracer died", time.Since(killed).Round(time.Millisecond))

	var out, log strings.Builder
	tr2, _, errs := traceAttached(t, &out, "-v", "-transport", "ring", "-stats", "-p", pid)
	logged := make(chan struct{})
	go func() { io.Copy(&log, errs); close(logged) }()
	// Once it has switched the probes on, -p keeps the counts of its
	// last poll, every 250 ms: a few of them, later under emulation.
	for deadline := time.Now().Add(10 * time.Second * time.Duration(tracetest.TimeSlack)); !allAre(readUints(t, prog.Process.Pid, sems, 4), 1<<16); {
		if time.Now().After(deadline) {
			t.Fatal("the second trace did not switch the probes on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond * time.Duration(max(1, tracetest.TimeSlack/5)))
	fmt.Fprintln(stdin) // the program ends, and the trace with it
	<-logged
	if err := tr2.Wait(); err != nil {
		t.Fatalf("the second trace: %v\n%s%s", err, out.String(), log.String())
	}
	if counts := statCounts(out.String()); counts["main.add"] == 0 {
		t.Errorf("the second trace counted no call:\n%s", out.String())
	}
}

// killedTracerBesideBpftrace attaches bt to the exit probe of the ring
// fixture's add, then a ring trace while the program calls, and kills
// the trace: the semaphore of add's exit probe keeps bpftrace's 1 (the
// low half, the kernel's) throughout, while the ring's flag (the high
// half) comes and goes. Then the program stops, a second ring trace
// attaches, and the program makes a known number of calls: bpftrace
// counts every call of both rounds, the second trace every call of the
// second.
func killedTracerBesideBpftrace(t *testing.T, bt tracetest.Bpftrace, bin string) {
	calls := 20000
	if tracetest.TimeSlack > 1 {
		calls = 2000
	}
	// The goroutine naps after its calls, for the last poll of trace -p.
	prog, stdin, lines := startReady(t, bin, "-wait", "-nap", lastPollNap().String(), "-then", strconv.Itoa(calls), "0")
	pid := strconv.Itoa(prog.Process.Pid)
	sems := semaphores(t, bin)
	bpf, br, bpfErr := countAdds(t, bt, bin)
	// Only bpftrace's probe counts in the low half, as the kernel
	// raises it: one slot is 1 (with ringFlag), every other 0.
	bpftraceOnly := func(words []uint64, ringFlag uint64) bool {
		ones := 0
		for _, w := range words {
			switch w {
			case ringFlag | 1:
				ones++
			case ringFlag:
			default:
				return false
			}
		}
		return ones == 1
	}
	if on := readUints(t, prog.Process.Pid, sems, 4); !bpftraceOnly(on, 0) {
		t.Fatalf("with bpftrace attached to one probe, the semaphores' slots are %#x, want one 1 and the rest 0", on)
	}
	fmt.Fprintln(stdin) // the first round: calls until the next line
	tr, _, _ := traceAttached(t, io.Discard, "-v", "-transport", "ring", "-stats", "-p", pid)
	if on := readUints(t, prog.Process.Pid, sems, 4); !bpftraceOnly(on, 1<<16) {
		t.Fatalf("traced beside bpftrace, the semaphores' slots are %#x, want one 0x10001 and the rest 0x10000", on)
	}
	tr.Process.Kill()
	tr.Wait()
	semaphoresBack(t, prog.Process.Pid, sems, 4, time.Now(), func(w []uint64) bool { return bpftraceOnly(w, 0) }, "bpftrace's: one 1 and the rest 0")
	fmt.Fprintln(stdin) // the first round ends
	l, _ := lines.ReadString('\n')
	var first int
	if _, err := fmt.Sscanf(l, "add=%d ", &first); err != nil || first == 0 {
		t.Fatalf("the fixture said %q after its first round", l)
	}

	var out, log strings.Builder
	tr2, _, errs := traceAttached(t, &out, "-v", "-transport", "ring", "-stats", "-p", pid)
	logged := make(chan struct{})
	go func() { io.Copy(&log, errs); close(logged) }()
	fmt.Fprintln(stdin) // the second round: calls calls
	if l, _ := lines.ReadString('\n'); !strings.HasPrefix(l, fmt.Sprintf("add=%d ", calls)) {
		t.Errorf("the fixture said %q after its second round", l)
	}
	stdin.Close()
	prog.Wait()
	<-logged
	if err := tr2.Wait(); err != nil {
		t.Errorf("the second trace: %v\n%s%s", err, out.String(), log.String())
	}
	if rest := interruptBpftrace(t, bpf, br); !strings.Contains(rest, fmt.Sprintf("@calls: %d\n", first+calls)) {
		t.Errorf("bpftrace counted, beside a ring trace killed in the first round of %d calls, then another in the second of %d:\n%s%s", first, calls, rest, bpfErr.String())
	}
	if counts := statCounts(out.String()); counts["main.add"] != calls {
		t.Errorf("the second trace counted %d calls of main.add, want %d:\n%s", counts["main.add"], calls, out.String())
	}
}

// TestRingKilledAnyMoment kills a ring trace of -p with SIGKILL at each
// step of its session's life (ring.Steps: ring.PauseEnv stops it there
// first), and at 20
// random moments of its start and of its stop: every semaphore, both
// halves of each probe's slot, is back to 0 within 2 s, turned off by
// the tracer or by the program's lapsed lease, never both (a semaphore
// taken down twice wraps to 0xffff), and a trace attached afterwards
// counts.
func TestRingKilledAnyMoment(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	prog, stdin, _ := startReady(t, bin, "-wait", "0")
	fmt.Fprintln(stdin) // it calls until the next line
	pid := prog.Process.Pid
	sems := semaphores(t, bin)
	args := []string{"-v", "-transport", "ring", "-stats", "-p", strconv.Itoa(pid)}
	ctl := ringAddress(t, bin)
	free := func(t *testing.T) { ringFree(t, pid, ctl) }
	off := func(t *testing.T, killed time.Time) { semaphoresOff(t, pid, sems, 4, killed) }
	for _, step := range ring.Steps {
		t.Run(step.Name, func(t *testing.T) {
			free(t)
			off(t, killAtStep(t, pid, sems, 4, step, args))
		})
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 50))
	for i := range 20 {
		stopping := i%2 == 1
		var delay time.Duration
		if stopping {
			delay = time.Duration(rng.Int64N(int64(10 * time.Millisecond)))
		} else {
			delay = time.Duration(rng.Int64N(int64(600 * time.Millisecond)))
		}
		t.Run(fmt.Sprintf("%d %v stopping %v", i, delay, stopping), func(t *testing.T) {
			free(t)
			tr, stderr := startTrace(t, nil, args...)
			if stopping {
				waitAttached(t, stderr)
				tr.Process.Signal(os.Interrupt)
			}
			time.Sleep(delay)
			tr.Process.Kill()
			tr.Wait()
			off(t, time.Now())
		})
	}
	free(t)
	var out strings.Builder
	tr, _, _ := traceAttached(t, &out, args...)
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintln(stdin) // the program ends, and the trace with it
	if err := tr.Wait(); err != nil {
		t.Fatalf("the trace after the kills: %v\n%s", err, out.String())
	}
	if counts := statCounts(out.String()); counts["main.add"] == 0 {
		t.Errorf("the trace after the kills counted no call:\n%s", out.String())
	}
}

// ringAddress is where the executable bin, not position-independent,
// has the ring.
func ringAddress(t *testing.T, bin string) uint64 {
	t.Helper()
	f, err := elf.Open(bin)
	var ctl uint64
	ok := err == nil
	if ok {
		ctl, _, ok = ring.Address(f)
		f.Close()
	}
	if !ok {
		t.Fatalf("%s has no ring of this tracer's layout (%v)", bin, err)
	}
	return ctl
}

// ringFree waits until a trace may open the ring at ctl in process pid:
// the program, or the next tracer, takes down what the last one left on.
func ringFree(t *testing.T, pid int, ctl uint64) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second * time.Duration(tracetest.TimeSlack)); ; time.Sleep(20 * time.Millisecond) {
		busy, err := ring.InUse(pid, ctl)
		if err != nil {
			t.Fatal(err)
		}
		if !busy {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the ring is still on 3 s after the last tracer's end")
		}
	}
}

// semaphoresOff waits until the size-byte words at sems in process pid
// are all 0, 2 s at most from killed.
func semaphoresOff(t *testing.T, pid int, sems []uint64, size int, killed time.Time) {
	t.Helper()
	semaphoresBack(t, pid, sems, size, killed, func(w []uint64) bool { return allAre(w, 0) }, "all 0")
}

// semaphoresBack waits until the semaphores at sems (words of size
// bytes) of process pid are back as back says, want in words, within 2 s
// of killed, the tracer's SIGKILL.
func semaphoresBack(t *testing.T, pid int, sems []uint64, size int, killed time.Time, back func([]uint64) bool, want string) {
	t.Helper()
	for {
		words := readUints(t, pid, sems, size)
		if back(words) {
			return
		}
		if time.Since(killed) > 2*time.Second*time.Duration(tracetest.TimeSlack) {
			t.Fatalf("the semaphores are %#x 2 s after the tracer's SIGKILL, want %s", words, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killAtStep starts a ring trace with args that stops at step of its
// session (ring.PauseEnv), after its SIGINT for Stop's steps, kills it
// there and returns when. It logs what the semaphores at sems (words of
// size bytes) of process pid were at that step.
func killAtStep(t *testing.T, pid int, sems []uint64, size int, step ring.Step, args []string) time.Time {
	t.Helper()
	tr, stderr := startTrace(t, []string{ring.PauseEnv + "=" + step.Name}, args...)
	if step.Detaching {
		waitAttached(t, stderr)
		tr.Process.Signal(os.Interrupt)
	}
	if !waitStopped(tr.Process.Pid, 10*time.Second*time.Duration(tracetest.TimeSlack)) {
		t.Fatalf("the tracer did not stop at %s", step.Name)
	}
	t.Logf("the semaphores at %s: %#x", step.Name, readUints(t, pid, sems, size))
	tr.Process.Kill()
	tr.Wait()
	return time.Now()
}

// TestRingKilledProvider kills a ring trace of usdtgen's probes, whose
// 16-bit semaphores the tracer adds one to, where the program's writer
// must take them back when the lease lapses (ListNarrow), at each step of
// its session's life (ring.Steps), and stops one as usual: each semaphore is back to 0 within 2 s, never taken down
// twice (0xffff).
func TestRingKilledProvider(t *testing.T) {
	requireRing(t)
	bin := buildJobs(routeA)(t)
	prog := exec.Command(bin, "-jobs", "1000000", "-every", "1ms")
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Process.Kill(); prog.Wait() })
	pid := prog.Process.Pid
	sems := semaphores(t, bin)
	ctl := ringAddress(t, bin)
	args := []string{"-v", "-transport", "ring", "-stats", "-p", strconv.Itoa(pid)}
	for _, step := range ring.Steps {
		t.Run(step.Name, func(t *testing.T) {
			ringFree(t, pid, ctl)
			semaphoresOff(t, pid, sems, 2, killAtStep(t, pid, sems, 2, step, args))
		})
	}
	ringFree(t, pid, ctl)
	tr, stderr := startTrace(t, nil, args...)
	waitAttached(t, stderr)
	if on := readUints(t, pid, sems, 2); !allAre(on, 1) {
		t.Errorf("the semaphores are %#x while traced, want all 1", on)
	}
	tr.Process.Signal(os.Interrupt)
	if err := tr.Wait(); err != nil {
		t.Fatal(err)
	}
	semaphoresOff(t, pid, sems, 2, time.Now())
}

// startTrace starts usdt-toolexec trace with args and env added to its
// environment, and returns it with its stderr.
func startTrace(t *testing.T, env []string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), append([]string{"trace"}, args...)...)
	tr.Env = append(os.Environ(), env...)
	tr.Stdout = io.Discard
	pipe, err := tr.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	return tr, bufio.NewReader(pipe)
}

// waitAttached reads stderr until trace -v says it attached.
func waitAttached(t *testing.T, stderr *bufio.Reader) {
	t.Helper()
	var seen strings.Builder
	for {
		line, err := stderr.ReadString('\n')
		seen.WriteString(line)
		if strings.Contains(line, "attached") {
			go io.Copy(io.Discard, stderr)
			return
		}
		if err != nil {
			t.Fatalf("usdt-toolexec trace -v did not say it attached (%v):\n%s", err, seen.String())
		}
	}
}

// waitStopped waits until process pid is stopped by a signal (state T),
// for at most d.
func waitStopped(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// The state follows the command's name in parentheses.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i:]), ") T") {
			return true
		}
	}
	return false
}

// TestRingAutoPtraced traces a process that a ring trace already records,
// without -transport, as root: trace cannot record through its ring too,
// so it takes BPF, says why, and both traces count.
func TestRingAutoPtraced(t *testing.T) {
	requireRing(t)
	requireBPF(t)
	bin := buildFixtureRules(t, "ring")
	prog, stdin, _ := startReady(t, bin, "-wait", "0")
	fmt.Fprintln(stdin) // it calls until the next line
	pid := strconv.Itoa(prog.Process.Pid)
	var ringOut, autoOut strings.Builder
	ringTrace, _, _ := traceAttached(t, &ringOut, "-v", "-transport", "ring", "-stats", "-p", pid, "main.add")
	auto, autoLine, autoErr := traceAttached(t, &autoOut, "-v", "-transport", "auto", "-stats", "-p", pid, "main.add")
	var autoLog strings.Builder
	logged := make(chan struct{})
	go func() { io.Copy(&autoLog, autoErr); close(logged) }()
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintln(stdin) // the program ends, and both traces with it
	if err := ringTrace.Wait(); err != nil {
		t.Errorf("the ring trace: %v", err)
	}
	// Its stderr read to the end before Wait closes the pipe.
	<-logged
	if err := auto.Wait(); err != nil {
		t.Errorf("the trace without -transport: %v", err)
	}
	why := regexp.MustCompile(`transport bpf: another trace records through the ring of process ` + pid)
	if !why.MatchString(autoLog.String()) {
		t.Errorf("the trace without -transport does not say %s:\n%s%s", why, autoLine, autoLog.String())
	}
	ringCalls, autoCalls := statCounts(ringOut.String())["main.add"], statCounts(autoOut.String())["main.add"]
	if ringCalls == 0 || autoCalls == 0 {
		t.Errorf("the ring trace counted %d calls of main.add, BPF %d: want both some\n%s\n%s", ringCalls, autoCalls, ringOut.String(), autoOut.String())
	}
}

// semaphores returns the addresses of the semaphores of bin's probes,
// from its notes as readelf prints them: bin is not position-independent.
// A guest, which has no readelf, reads what the host's found
// (writeSemaphores).
func semaphores(t *testing.T, bin string) []uint64 {
	t.Helper()
	if guestDir != "" {
		data, err := os.ReadFile(bin + semaphoresSuffix)
		if err != nil {
			t.Fatalf("the host wrote no semaphores for %s: %v", bin, err)
		}
		var addrs []uint64
		for _, f := range strings.Fields(string(data)) {
			a, err := strconv.ParseUint(f, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			addrs = append(addrs, a)
		}
		return addrs
	}
	seen := map[uint64]bool{}
	var addrs []uint64
	for _, n := range readelfNotes(t, bin) {
		a, err := strconv.ParseUint(strings.TrimPrefix(n.semaphore, "0x"), 16, 64)
		if err != nil || a == 0 {
			t.Fatalf("probe %s has semaphore %q", n.name, n.semaphore)
		}
		if !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	if f, err := elf.Open(bin); err != nil || f.Type != elf.ET_EXEC {
		t.Fatalf("%s is not a plain executable (%v)", bin, err)
	}
	return addrs
}

// semaphoresSuffix names the file beside a binary built for a guest
// that holds its semaphores' addresses.
const semaphoresSuffix = ".semaphores"

// writeSemaphores writes bin's semaphores for a guest's semaphores.
func writeSemaphores(t *testing.T, bin string) {
	t.Helper()
	var text strings.Builder
	for _, a := range semaphores(t, bin) {
		fmt.Fprintf(&text, "%x\n", a)
	}
	if err := os.WriteFile(bin+semaphoresSuffix, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readUints reads the size-byte words (2: a semaphore, 4: an automatic
// probe's slot, the semaphore its low half) at addrs in process pid.
func readUints(t *testing.T, pid int, addrs []uint64, size int) []uint64 {
	t.Helper()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	words := make([]uint64, len(addrs))
	for i, a := range addrs {
		var b [8]byte
		if _, err := mem.ReadAt(b[:size], int64(a)); err != nil {
			t.Fatal(err)
		}
		words[i] = binary.LittleEndian.Uint64(b[:])
	}
	return words
}

func allAre(words []uint64, v uint64) bool {
	for _, w := range words {
		if w != v {
			return false
		}
	}
	return len(words) > 0
}

// TestRingWithBpftrace has bpftrace and a ring trace attached to the same
// process at once, attached in either order: both count every call.
func TestRingWithBpftrace(t *testing.T) {
	requireRing(t)
	requireBPF(t)
	bin := buildFixtureRules(t, "ring")
	// Each is a trap for bpftrace: fewer under emulation.
	calls := 100000
	if tracetest.TimeSlack > 1 {
		calls = 10000
	}
	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		bt.RequireAttach(t)
		for _, ringFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("ring first %v", ringFirst), func(t *testing.T) {
				// The goroutines nap after their calls: a ring
				// trace of -p reads the counts at its polls, and
				// what a process counts after the last goes with it.
				prog, stdin, lines := startReady(t, bin, "-wait", "-g", "2", "-nap", lastPollNap().String(), strconv.Itoa(calls/2))
				pid := strconv.Itoa(prog.Process.Pid)
				var ringOut strings.Builder
				var tr *exec.Cmd
				attachRing := func() { tr, _, _ = traceAttached(t, &ringOut, "-v", "-transport", "ring", "-stats", "-p", pid) }
				if ringFirst {
					attachRing()
				}
				bpf, br, bpfErr := countAdds(t, bt, bin)
				if !ringFirst {
					attachRing()
				}
				fmt.Fprintln(stdin)
				if l, _ := lines.ReadString('\n'); !strings.HasPrefix(l, fmt.Sprintf("add=%d wide=%d ", calls, calls/100)) {
					t.Errorf("the fixture said %q", l)
				}
				stdin.Close()
				prog.Wait()
				rest := interruptBpftrace(t, bpf, br)
				if err := tr.Wait(); err != nil {
					t.Errorf("trace: %v", err)
				}
				if !strings.Contains(string(rest), fmt.Sprintf("@calls: %d\n", calls)) {
					t.Errorf("bpftrace counted, beside the ring:\n%s%s", rest, bpfErr.String())
				}
				if counts := statCounts(ringOut.String()); counts["main.add"] != calls {
					t.Errorf("the ring counted, beside bpftrace:\n%s", ringOut.String())
				}
			})
		}
	})
}

// lastPollNap is how long a fixture naps after its calls so that a
// trace of -p, which reads the counts at its polls, reads them once more
// before the process exits: it polls every 250 ms, and under emulation
// (TimeSlack) later, where a read of the counts costs more and the next
// waits 20 times as long.
func lastPollNap() time.Duration {
	return 500 * time.Millisecond * time.Duration(max(1, tracetest.TimeSlack/5))
}

// TestRingAttachDetachBesideBpftrace has a ring trace and bpftrace each
// attach to one program and detach again, 40 times each, at once,
// while the program calls: the tracer's writes of the semaphores and the
// kernel's (bpftrace's uprobes raise and lower the same counters) race
// throughout. Each trace and each bpftrace counts calls while attached
// (where the program ran for 30 ms of CPU meanwhile: on a loaded machine
// it may not run at all in a window), and at the end every semaphore is
// back at 0: no update was lost.
func TestRingAttachDetachBesideBpftrace(t *testing.T) {
	requireRing(t)
	requireBPF(t)
	tracetest.Host.RequireAttach(t)
	if guestDir != "" || testing.Short() {
		t.Skip("80 attaches: the host's test")
	}
	const rounds = 40
	bin := buildFixtureRules(t, "ring")
	prog, stdin, lines := startReady(t, bin, "-wait", "-g", "2", "0")
	pid := prog.Process.Pid
	sems := semaphores(t, bin)
	fmt.Fprintln(stdin) // the goroutines call until the next line

	type result struct {
		errs    []string
		checked int
	}
	bpfDone := make(chan result, 1)
	go func() {
		var r result
		for i := range rounds {
			ran, err := countAddsOnce(tracetest.Host, bin, pid)
			if err != nil {
				r.errs = append(r.errs, fmt.Sprintf("bpftrace %d: %v", i, err))
			}
			if ran {
				r.checked++
			}
		}
		bpfDone <- r
	}()
	checked := 0
	for i := range rounds {
		var out strings.Builder
		tr, _, errs := traceAttached(t, &out, "-v", "-transport", "ring", "-stats", "-p", strconv.Itoa(pid))
		var log strings.Builder
		logged := make(chan struct{})
		go func() { io.Copy(&log, errs); close(logged) }()
		ran := ranFor(pid, attachedHold)
		tr.Process.Signal(os.Interrupt)
		<-logged
		if err := tr.Wait(); err != nil {
			t.Fatalf("trace %d: %v\n%s", i, err, log.String())
		}
		if ran {
			checked++
			if n := statCounts(out.String())["main.add"]; n == 0 {
				t.Errorf("trace %d counted no call of main.add (semaphores now %#x):\n%s%s", i, readUints(t, pid, sems, 4), out.String(), log.String())
			}
		}
	}
	r := <-bpfDone
	for _, e := range r.errs {
		t.Error(e)
	}
	t.Logf("counts checked where the program ran: %d of %d ring traces, %d of %d bpftraces", checked, rounds, r.checked, rounds)
	if checked < rounds/10 || r.checked < rounds/10 {
		t.Errorf("the program ran 30 ms of CPU while attached in %d ring traces and %d bpftraces of %d each: too few to check the counts", checked, r.checked, rounds)
	}
	// Both are detached: every semaphore, both halves, at 0 at once.
	if words := readUints(t, pid, sems, 4); !allAre(words, 0) {
		t.Errorf("after %d ring traces and %d bpftraces attached and detached, the semaphores are %#x, want all 0", rounds, rounds, words)
	}
	fmt.Fprintln(stdin)
	if l, _ := lines.ReadString('\n'); !strings.HasPrefix(l, "add=") {
		t.Errorf("the fixture said %q", l)
	}
}

// attachedHold is how long TestRingAttachDetachBesideBpftrace keeps each
// tracer attached.
const attachedHold = 100 * time.Millisecond

// ranFor waits d and reports whether process pid ran for 30 ms of CPU
// meanwhile.
func ranFor(pid int, d time.Duration) bool {
	_, before, _ := procStat(pid)
	time.Sleep(d)
	_, after, ok := procStat(pid)
	return ok && after-before >= 30*time.Millisecond
}

// countAddsOnce runs bt on the exit probe of bin's main.add for
// attachedHold once it has attached (it exits by itself: no interrupt,
// which a bpftrace under load has been seen to miss), and checks that
// it counted calls where process pid ran meanwhile, which it reports.
func countAddsOnce(bt tracetest.Bpftrace, bin string, pid int) (ran bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second*time.Duration(tracetest.TimeSlack))
	defer cancel()
	bpf := bt.Command(ctx, "", "-e", fmt.Sprintf(`BEGIN { printf("attached\n"); } usdt:%s:ring:exit__main__add { @calls = count(); } interval:ms:%d { exit(); }`, bin, attachedHold.Milliseconds()))
	out, err := bpf.StdoutPipe()
	if err != nil {
		return false, err
	}
	var stderr strings.Builder
	bpf.Stderr = &stderr
	if err := bpf.Start(); err != nil {
		return false, err
	}
	defer bpf.Wait()
	defer bpf.Process.Kill()
	br := bufio.NewReader(out)
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return false, fmt.Errorf("ended before it attached (%v)\n%s", err, stderr.String())
		}
		if l == "attached\n" {
			break
		}
	}
	_, before, _ := procStat(pid)
	rest, _ := io.ReadAll(br)
	_, after, ok := procStat(pid)
	ran = ok && after-before >= 30*time.Millisecond
	var calls int
	if i := strings.Index(string(rest), "@calls: "); i >= 0 {
		fmt.Sscanf(string(rest[i:]), "@calls: %d", &calls)
	}
	if ran && calls == 0 {
		return ran, fmt.Errorf("counted no call:\n%s%s", rest, stderr.String())
	}
	return ran, nil
}

// countAdds starts bt counting the calls of bin's main.add (its exit
// probe) in @calls, and returns it once attached, with its stdout and
// stderr. By path, not -p: bpftrace 0.27.1 attaches a probe named by
// path twice with -p, and counts each call twice, traced through the
// ring or not.
func countAdds(t *testing.T, bt tracetest.Bpftrace, bin string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
	t.Helper()
	return startBpftrace(t, bt, fmt.Sprintf(`usdt:%s:ring:exit__main__add { @calls = count(); }`, bin))
}

// startBpftrace starts bt running script, and returns it once attached
// (it prints "attached" in BEGIN), with its stdout and stderr.
func startBpftrace(t *testing.T, bt tracetest.Bpftrace, script string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
	t.Helper()
	bpf := bt.Command(t.Context(), "", "-e", `BEGIN { printf("attached\n"); } `+script)
	bpfOut, err := bpf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	bpfErr := &strings.Builder{}
	bpf.Stderr = bpfErr
	if err := bpf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bpf.Process.Kill(); bpf.Wait() })
	br := bufio.NewReader(bpfOut)
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("bpftrace ended before it attached: %v\n%s", err, bpfErr.String())
		}
		if l == "attached\n" {
			return bpf, br, bpfErr
		}
	}
}

// interruptBpftrace interrupts bpf, a bpftrace that countAdds started,
// and returns what it printed after it attached: its maps. It sends the
// interrupt again every 2 s until bpftrace ends: bpftrace's handler only
// sets a flag that its loop reads when epoll_wait returns, and one that
// came just before the wait is lost (seen here: bpftrace 0.17 asleep in
// do_epoll_wait for 10 minutes, SIGINT caught and none pending; once, in
// the 6.1 guest, one sat through the rest of the guest's 25 minutes). A
// bpftrace that has not ended 30 s later (times the slack) fails the
// test, with where the kernel has it waiting, and is killed.
func interruptBpftrace(t *testing.T, bpf *exec.Cmd, br *bufio.Reader) string {
	t.Helper()
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(br)
		out <- b
	}()
	deadline := time.After(30 * time.Second * time.Duration(tracetest.TimeSlack))
	for sent := 1; ; sent++ {
		bpf.Process.Signal(os.Interrupt)
		select {
		case b := <-out:
			bpf.Wait()
			if sent > 1 {
				t.Logf("bpftrace ended on its interrupt number %d", sent)
			}
			return string(b)
		case <-time.After(2 * time.Second):
			continue
		case <-deadline:
		}
		break
	}
	pid := bpf.Process.Pid
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
	stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stack", pid))
	bpf.Process.Kill()
	bpf.Wait()
	t.Errorf("bpftrace did not end on its interrupt: stat %s, waiting in %s\n%s", stat, wchan, stack)
	return string(<-out)
}

// TestRingFlagsWithBpftrace has bpftrace count main.add's calls while a
// ring trace of them attaches and detaches 20 times: the probe's slot is
// bpftrace's count of uprobes in its low half throughout, the ring's
// flag in its high half only while the ring trace is attached, and
// bpftrace counts every call. The ring never writes the kernel's half:
// the tracer's read and write of it could lose the kernel's update when
// bpftrace attached at the same moment.
func TestRingFlagsWithBpftrace(t *testing.T) {
	requireRing(t)
	requireBPF(t)
	bin := buildFixtureRules(t, "ring")
	var slot uint64
	for _, n := range readelfNotes(t, bin) {
		if n.name == "exit__main__add" {
			slot, _ = strconv.ParseUint(strings.TrimPrefix(n.semaphore, "0x"), 16, 64)
		}
	}
	if slot == 0 {
		t.Fatalf("%s has no probe exit__main__add with a semaphore", bin)
	}
	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		bt.RequireAttach(t)
		prog, stdin, lines := startReady(t, bin, "-wait", "0")
		pid := prog.Process.Pid
		bpf, br, bpfErr := countAdds(t, bt, bin)
		want := func(when string, v uint64) {
			t.Helper()
			if got := readUints(t, pid, []uint64{slot}, 4)[0]; got != v {
				t.Fatalf("%s: main.add's slot is %#x, want %#x", when, got, v)
			}
		}
		want("bpftrace attached", 1)
		fmt.Fprintln(stdin) // the calls begin
		for i := range 20 {
			var out strings.Builder
			tr, _, _ := traceAttached(t, &out, "-v", "-transport", "ring", "-stats", "-p", strconv.Itoa(pid), "main.add")
			want(fmt.Sprintf("ring trace %d attached", i), 1<<16|1)
			time.Sleep(100 * time.Millisecond)
			tr.Process.Signal(os.Interrupt)
			if err := tr.Wait(); err != nil {
				t.Fatalf("ring trace %d: %v", i, err)
			}
			want(fmt.Sprintf("ring trace %d detached", i), 1)
			if statCounts(out.String())["main.add"] == 0 {
				t.Errorf("ring trace %d counted no call:\n%s", i, out.String())
			}
		}
		fmt.Fprintln(stdin) // the calls end, and the program
		l, _ := lines.ReadString('\n')
		adds, _, _ := strings.Cut(strings.TrimPrefix(l, "add="), " ")
		prog.Wait()
		rest := interruptBpftrace(t, bpf, br)
		if !strings.Contains(string(rest), "@calls: "+adds+"\n") {
			t.Errorf("bpftrace counted, beside the ring traces, not the program's %s calls:\n%s%s", adds, rest, bpfErr.String())
		}
	})
}

// TestRingStale: a binary whose ring is of an older layout (its Where
// has the first layout's magic, as an older usdt-toolexec wrote it) is
// never written: -transport ring refuses it, saying so, and trace
// without -transport takes BPF, saying why.
func TestRingStale(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	magic := binary.LittleEndian.AppendUint64(nil, ringlayout.WhereMagic)
	if n := bytes.Count(data, magic); n != 1 {
		t.Fatalf("%d copies of the ring's magic in the binary, want 1", n)
	}
	old := filepath.Join(t.TempDir(), "old")
	// The second layout's tracer and writer both took the semaphores
	// down: never written by this tracer either.
	for _, older := range []string{"\x7fUSDTrn2", "\x7fUSDTrng"} {
		if err := os.WriteFile(old, bytes.Replace(data, magic, []byte(older), 1), 0o755); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := usdtTrace(t, "-transport", "ring", "--", old, "1")
		if err == nil || !strings.Contains(stderr, "an older usdt-toolexec's") {
			t.Errorf("-transport ring on a ring of magic %q: %v, want an error naming the older usdt-toolexec:\n%s", older, err, stderr)
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	requireBPF(t)
	cmd := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "trace", "-v", "-stats", "--", old, "1")
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`transport bpf: the binary's in-process ring is an older usdt-toolexec's`).Match(out) {
		t.Errorf("trace without -transport: %v, want BPF, saying why:\n%s", err, out)
	}
}
