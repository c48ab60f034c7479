package e2e

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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
	if os.Geteuid() != 0 {
		t.Skip("the test becomes nobody with setpriv, which needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed: cannot run trace as nobody")
	}
	dir, err := os.MkdirTemp("", "usdt-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
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
	}
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

// TestRingKilledTracer kills a ring trace with SIGKILL: within two
// seconds the program turns the probes it turned on off by itself, its
// semaphores back at zero, and a second trace attaches and counts.
func TestRingKilledTracer(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "ring")
	prog, stdin, _ := startReady(t, bin, "-wait", "0")
	fmt.Fprintln(stdin) // it calls until the next line
	pid := strconv.Itoa(prog.Process.Pid)

	tr, _, _ := traceAttached(t, io.Discard, "-v", "-transport", "ring", "-stats", "-p", pid)
	sems := semaphores(t, bin)
	if on := readWords(t, prog.Process.Pid, sems); !allAre(on, 1) {
		t.Fatalf("the semaphores are %v while traced, want all 1", on)
	}
	tr.Process.Kill()
	tr.Wait()
	killed := time.Now()
	for {
		off := readWords(t, prog.Process.Pid, sems)
		if allAre(off, 0) {
			break
		}
		if time.Since(killed) > 2*time.Second*time.Duration(tracetest.TimeSlack) {
			t.Fatalf("the semaphores are %v 2s after the tracer's SIGKILL, want all 0", off)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the program turned its probes off %v after the tracer died", time.Since(killed).Round(time.Millisecond))

	var out, log strings.Builder
	tr2, _, errs := traceAttached(t, &out, "-v", "-transport", "ring", "-stats", "-p", pid)
	logged := make(chan struct{})
	go func() { io.Copy(&log, errs); close(logged) }()
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintln(stdin) // the program ends, and the trace with it
	<-logged
	if err := tr2.Wait(); err != nil {
		t.Fatalf("the second trace: %v\n%s%s", err, out.String(), log.String())
	}
	if counts := statCounts(out.String()); counts["main.add"] == 0 {
		t.Errorf("the second trace counted no call:\n%s", out.String())
	}
}

// TestRingAutoPtraced traces a process that a ring trace already holds,
// without -transport, as root: trace cannot ptrace it too, so it takes
// BPF, says why, and both traces count.
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
	why := regexp.MustCompile(`transport bpf: the ring ptraces process ` + pid + `, which process \d+ already does`)
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

// readWords reads the 16-bit words at addrs in process pid.
func readWords(t *testing.T, pid int, addrs []uint64) []uint16 {
	t.Helper()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	words := make([]uint16, len(addrs))
	for i, a := range addrs {
		var b [2]byte
		if _, err := mem.ReadAt(b[:], int64(a)); err != nil {
			t.Fatal(err)
		}
		words[i] = binary.LittleEndian.Uint16(b[:])
	}
	return words
}

func allAre(words []uint16, v uint16) bool {
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
				prog, stdin, lines := startReady(t, bin, "-wait", "-g", "2", strconv.Itoa(calls/2))
				pid := strconv.Itoa(prog.Process.Pid)
				var ringOut strings.Builder
				var tr *exec.Cmd
				attachRing := func() { tr, _, _ = traceAttached(t, &ringOut, "-v", "-transport", "ring", "-stats", "-p", pid) }
				if ringFirst {
					attachRing()
				}
				// By path, not -p: bpftrace 0.27.1 attaches a probe
				// named by path twice with -p, and counts each call
				// twice, traced through the ring or not.
				bpf := bt.Command(t.Context(), "", "-e", fmt.Sprintf(`BEGIN { printf("attached\n"); } usdt:%s:ring:exit__main__add { @calls = count(); }`, bin))
				bpfOut, err := bpf.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				var bpfErr strings.Builder
				bpf.Stderr = &bpfErr
				if err := bpf.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { bpf.Process.Kill(); bpf.Wait() })
				br := bufio.NewReader(bpfOut)
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("bpftrace ended before it attached: %v", err)
					}
					if l == "attached\n" {
						break
					}
				}
				if !ringFirst {
					attachRing()
				}
				fmt.Fprintln(stdin)
				if l, _ := lines.ReadString('\n'); l != fmt.Sprintf("add=%d wide=%d\n", calls, calls/100) {
					t.Errorf("the fixture said %q", l)
				}
				stdin.Close()
				prog.Wait()
				bpf.Process.Signal(os.Interrupt)
				rest, _ := io.ReadAll(br)
				bpf.Wait()
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
