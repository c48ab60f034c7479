package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// lifeSrc waits a second (more under emulation) for a tracer to find it,
// then calls work 100 times, every 5 ms, and exits 0.6 s later.
const lifeSrc = `package main

import (
	"os"
	"strconv"
	"time"
)

func work(i int) int { return i * 2 }

func main() {
	slack, _ := strconv.Atoi(os.Getenv("` + tracetest.TimeSlackEnv + `"))
	time.Sleep(time.Duration(max(slack, 1)) * time.Second)
	for i := range 100 {
		work(i)
		time.Sleep(5 * time.Millisecond)
	}
	// As a service does between its last request and its exit: trace
	// reads a process of -exe, as one of -p, at its polls (its counts
	// every 250 ms), and what it recorded after the last goes with it
	// (trace says so).
	time.Sleep(time.Duration(max(slack, 1)) * 600 * time.Millisecond)
}
`

// TestTraceExe traces a service by its executable (-exe) while it lives
// three lives: one that runs when trace starts, and two that start later,
// one after the other, as a restarted service does. trace prints every
// call of each of the three processes, and ends on its interrupt.
func TestTraceExe(t *testing.T) {
	requireRing(t)
	bin := buildMain(t, "life", lifeSrc)
	for _, tc := range []struct {
		name string
		args []string
		// calls counts the calls of main.work by process in trace's
		// output.
		calls func(t *testing.T, out string) map[int]int
	}{
		{"events", []string{"-json", "main.work"}, func(t *testing.T, out string) map[int]int {
			calls := map[int]int{}
			for _, e := range parseTraceJSON(t, out) {
				if e.Args != nil {
					calls[e.PID]++
				}
			}
			return calls
		}},
		{"stats", []string{"-stats", "main.work"}, func(t *testing.T, out string) map[int]int {
			// Each process's counts when it ends, under its pid.
			calls := map[int]int{}
			for _, block := range strings.Split(out, "process ")[1:] {
				var pid int
				if _, err := fmt.Sscanf(block, "%d:", &pid); err != nil {
					t.Fatalf("a block of counts without its process: %q", block)
				}
				calls[pid] = statCounts(block)["main.work"]
			}
			return calls
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			life := func() *exec.Cmd {
				c := exec.Command(bin)
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Process.Kill(); c.Wait() })
				return c
			}
			first := life()
			tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), append([]string{"trace", "-transport", "ring", "-exe", bin}, tc.args...)...)
			var out, errOut bytes.Buffer
			tr.Stdout, tr.Stderr = &out, &errOut
			if err := tr.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Process.Kill() })
			pids := []int{first.Process.Pid}
			if err := first.Wait(); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				c := life()
				pids = append(pids, c.Process.Pid)
				if err := c.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			// The last one's events: read at its exit.
			time.Sleep(500 * time.Millisecond)
			interruptExe(t, tr, &errOut)
			calls := tc.calls(t, out.String())
			for _, pid := range pids {
				if calls[pid] != 100 {
					t.Errorf("process %d: trace saw %d calls of main.work, want 100", pid, calls[pid])
				}
				if !strings.Contains(errOut.String(), fmt.Sprintf("process %d runs ", pid)) {
					t.Errorf("trace does not say that it traces process %d", pid)
				}
			}
			if len(calls) != len(pids) {
				t.Errorf("calls of %d processes, want %d: %v", len(calls), len(pids), calls)
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", errOut.String())
			}
		})
	}
}

// TestTraceExeInRoot traces, by -exe, a process that runs in a root of
// its own (chroot, as a container's process runs in its image): the
// path -exe names is the executable's in that root, and nothing is at
// it in trace's. trace finds the process, says so, and prints every
// call; -pprof, which needs the executable in trace's own root to name
// the functions, is refused with the reason.
func TestTraceExeInRoot(t *testing.T) {
	requireRing(t)
	if os.Geteuid() != 0 {
		tracetest.SkipMissing(t, "chroot needs root")
	}
	bin := buildMain(t, "life", lifeSrc)
	root := t.TempDir()
	// An absolute path that is nowhere but in the process's root.
	inRoot := filepath.Join("/", "usdt-e2e-"+filepath.Base(root), "life")
	if _, err := os.Stat(inRoot); err == nil {
		t.Fatalf("%s exists in trace's root", inRoot)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, inRoot)), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, bin, filepath.Join(root, inRoot))

	tool := filepath.Join(toolsDir, "usdt-toolexec")
	out, err := exec.Command(tool, "trace", "-pprof", filepath.Join(t.TempDir(), "p"), "-exe", inRoot).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-pprof needs the executable here") {
		t.Errorf("trace -pprof -exe of a path only in the processes' roots: %v, want it refused with the reason:\n%s", err, out)
	}

	tr := exec.Command(tool, "trace", "-transport", "ring", "-json", "-exe", inRoot, "main.work")
	var trOut, errOut bytes.Buffer
	tr.Stdout, tr.Stderr = &trOut, &errOut
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill() })
	life := exec.Command("chroot", root, inRoot)
	if err := life.Run(); err != nil {
		t.Fatalf("chroot %s %s: %v", root, inRoot, err)
	}
	// Its last events: read at its exit.
	time.Sleep(500 * time.Millisecond)
	interruptExe(t, tr, &errOut)
	pid := life.Process.Pid
	calls := 0
	for _, e := range parseTraceJSON(t, trOut.String()) {
		if e.Args != nil && e.PID == pid {
			calls++
		}
	}
	if calls != 100 {
		t.Errorf("trace saw %d calls of main.work in process %d, want 100\nstderr:\n%s", calls, pid, errOut.String())
	}
	if !strings.Contains(errOut.String(), fmt.Sprintf("process %d runs %s", pid, inRoot)) {
		t.Errorf("trace does not say that it traces process %d:\n%s", pid, errOut.String())
	}
}

// interruptExe interrupts tr, a trace -exe, which must end within 30 s
// with status 0; errOut is its stderr.
func interruptExe(t *testing.T, tr *exec.Cmd, errOut *bytes.Buffer) {
	t.Helper()
	tr.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("trace -exe: %v\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("trace -exe did not end on its interrupt:\n%s", errOut.String())
	}
}

// TestTraceExeMetrics serves -exe's counts for Prometheus (-stats
// -metrics) while a service lives three lives, one after the other:
// scraped after the last, and parsed as Prometheus parses its text,
// main.work's calls are those of all three (300: the counts of a process
// that ended stay), and no process is traced any more.
func TestTraceExeMetrics(t *testing.T) {
	requireRing(t)
	bin := buildMain(t, "life", lifeSrc)
	tr, stderr := startTraceReading(t, nil, "-v", "-transport", "ring", "-stats", "-metrics", "127.0.0.1:0", "-exe", bin, "main.work")
	var errOut bytes.Buffer
	var url string
	for url == "" {
		line, err := stderr.ReadString('\n')
		errOut.WriteString(line)
		if err != nil {
			t.Fatalf("trace ended before it served its metrics (%v):\n%s", err, errOut.String())
		}
		if _, u, ok := strings.Cut(strings.TrimSpace(line), "metrics at "); ok {
			url = u
		}
	}
	var mu sync.Mutex
	logged := make(chan struct{})
	go func() {
		var rest bytes.Buffer
		io.Copy(&rest, stderr)
		mu.Lock()
		errOut.Write(rest.Bytes())
		mu.Unlock()
		close(logged)
	}()
	for range 3 {
		if out, err := exec.Command(bin).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", bin, err, out)
		}
	}
	// The last one's counts: read at its exit.
	time.Sleep(500 * time.Millisecond)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	calls := -1.0
	for _, m := range families["usdt_function_calls_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "code_function_name" && l.GetValue() == "main.work" {
				calls = m.GetCounter().GetValue()
			}
		}
	}
	procs := families["usdt_processes_traced"].GetMetric()
	if calls != 300 || len(procs) != 1 || procs[0].GetGauge().GetValue() != 0 {
		mu.Lock()
		t.Errorf("after three lives of 100 calls each, main.work's calls %v and %d processes traced (%v), want 300 and 0\nstderr:\n%s", calls, len(procs), procs, errOut.String())
		mu.Unlock()
	}
	tr.Process.Signal(os.Interrupt)
	<-logged
	if err := tr.Wait(); err != nil {
		t.Errorf("trace -exe -metrics: %v\n%s", err, errOut.String())
	}
}
