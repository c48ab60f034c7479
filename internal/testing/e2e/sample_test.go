package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rootsProgram makes 2,000 calls of handle, each a root call (nothing
// traced is open on its goroutine, and it passes no traceparent) that
// calls step.
const rootsProgram = `package main

import "fmt"

func step(i int) int { return i * 2 }

func handle(i int) int { return step(i) + 1 }

func main() {
	sum := 0
	for i := range 2000 {
		sum += handle(i)
	}
	fmt.Println("sum", sum)
}
`

// TestTraceSample: with -sample 0.1, 10 % ± 3 % of 2,000 root calls have
// their traces in Jaeger, each whole (the root and its child), and trace
// says how many calls it did not send. Calls that join their caller's
// trace follow its sampled flag whatever -sample says: with -sample 0,
// every request whose traceparent's flags say sampled (01) has its
// trace, and none whose flags say not (00).
func TestTraceSample(t *testing.T) {
	requireAMD64(t)
	j := startJaeger(t)
	t.Run("roots", func(t *testing.T) {
		bin := buildMain(t, "roots", rootsProgram)
		_, errOut, err := usdtTrace(t, "-transport", "ring", "-otlp", j.otlp, "-service", "sampled-e2e", "-sample", "0.1", "--", bin)
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, errOut)
		}
		const roots, min, max = 2000, 140, 260
		traces := j.traces(t, "sampled-e2e", min)
		if len(traces) < min || len(traces) > max {
			t.Errorf("Jaeger has %d traces of %d root calls sampled at 0.1, want %d to %d", len(traces), roots, min, max)
		}
		for id, spans := range traces {
			if len(spans) != 2 {
				t.Errorf("trace %s has %d spans, want main.handle's and main.step's", id, len(spans))
			}
		}
		m := regexp.MustCompile(`(\d+) calls were in traces that -sample did not sample: no span`).FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("trace does not say how many calls -sample left out:\n%s", errOut)
		}
		if n, _ := strconv.Atoi(m[1]); n != 2*(roots-len(traces)) {
			t.Errorf("trace says -sample left out %d calls; Jaeger has %d traces of 2 calls of %d roots, so %d", n, len(traces), roots, 2*(roots-len(traces)))
		}
	})
	dir := fixture(t, "joined")
	joined := filepath.Join(t.TempDir(), "joined")
	goCmd(t, dir, buildEnv(), "build", "-o", joined, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	// The program counts the calls it leaves out; with -buffer 128M on
	// 2 Ps its ring has no room for the counters, and it writes a
	// compact record of each instead: trace tells the calls their
	// callers left out from the others either way.
	for _, c := range []struct {
		name, service string
		args          []string
	}{
		{"joined", "joined-sample-e2e", nil},
		{"joined, compact records", "joined-compact-e2e", []string{"-buffer", "128M"}},
	} {
		t.Run(c.name, func(t *testing.T) { testSampleJoined(t, j, joined, c.service, c.args) })
	}
}

// testSampleJoined is TestTraceSample's run of testdata/joined at
// -sample 0, with args, the traces sent to service.
func testSampleJoined(t *testing.T, j jaeger, bin, service string, args []string) {
	t.Helper()
	t.Setenv("GOMAXPROCS", "2")
	args = append([]string{"-transport", "ring", "-otlp", j.otlp, "-service", service, "-sample", "0"}, args...)
	_, errOut, err := usdtTrace(t, append(args, "--", bin)...)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	// As TestTraceContext's: every tenth request, from the fifth,
	// is not sampled by its caller.
	const requests, unsampled = 200, 20
	traces := j.traces(t, service, requests-unsampled)
	for i := range requests {
		traceID := fmt.Sprintf("4bf92f3577b34da6a3ce929d%06x00", i)
		_, has := traces[traceID]
		if want := i%10 != 5; has != want {
			t.Errorf("request %d (caller sampled: %v) has a trace in Jaeger: %v", i, want, has)
		}
	}
	if len(traces) != requests-unsampled || strings.Contains(errOut, "-sample did not sample") {
		t.Errorf("Jaeger has %d traces, want %d, and trace's stderr says -sample left some out:\n%s", len(traces), requests-unsampled, errOut)
	}
	// Each request its caller did not sample makes 3 calls: serve,
	// check and price.
	if m := regexp.MustCompile(`(\d+) calls joined traces their callers did not sample`).FindStringSubmatch(errOut); m == nil || m[1] != strconv.Itoa(3*unsampled) {
		t.Errorf("trace does not say that %d calls joined traces their callers did not sample:\n%s", 3*unsampled, errOut)
	}
}

// failingRootsProgram makes 2,000 root calls of handle, which calls step
// unless it fails (every tenth call, from the tenth), then waits for the
// metrics to be read until it is killed.
const failingRootsProgram = `package main

import (
	"errors"
	"fmt"
	"time"
)

var errHeld = errors.New("on hold")

func step(i int) int { return i * 2 }

func handle(i int) (int, error) {
	if i%10 == 9 {
		return 0, errHeld
	}
	return step(i) + 1, nil
}

func main() {
	sum, failed := 0, 0
	for i := range 2000 {
		n, err := handle(i)
		if err != nil {
			failed++
		}
		sum += n
	}
	fmt.Println("sum", sum, "failed", failed)
	time.Sleep(300 * time.Second)
}
`

// TestMetricsSampled: with -sample 0.1, the program writes the events of
// a tenth of its root calls only, and counts the others itself; the
// metrics that a real Prometheus scrapes from -metrics still count every
// call, every duration and every error, whichever way each was counted.
// With a ring whose buffers leave no room for the program's counters
// (-buffer 128M, 2 Ps), the calls left out come to trace as compact
// records instead, counted the same.
func TestMetricsSampled(t *testing.T) {
	requireAMD64(t)
	requireRing(t)
	bin := buildMain(t, "failing", failingRootsProgram)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"counted in the program", nil},
		{"compact records", []string{"-buffer", "128M"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
			api := startPrometheus(t, addr)
			args := append([]string{"trace", "-transport", "ring", "-v", "-otlp", api + "/api/v1/otlp", "-service", "sampled-metrics", "-sample", "0.1", "-metrics", addr}, c.args...)
			tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), append(args, "--", bin)...)
			tr.Env = append(os.Environ(), "GOMAXPROCS=2")
			tr.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			proc := startServer(t, tr)
			t.Cleanup(func() { syscall.Kill(-tr.Process.Pid, syscall.SIGKILL) })
			output := func() string { return "trace's output:\n" + proc.output() }
			for _, q := range []struct {
				query string
				want  float64
			}{
				{`usdt_function_calls_total{code_function_name="main.handle"}`, 2000},
				{`usdt_function_duration_seconds_count{code_function_name="main.handle"}`, 2000},
				{`usdt_function_calls_total{code_function_name="main.step"}`, 1800},
				{`usdt_function_errors_total{code_function_name="main.handle"}`, 200},
			} {
				var got float64
				waitFor(t, 45*time.Second, fmt.Sprintf("Prometheus to have %s %v", q.query, q.want), func() bool {
					got, _ = promQuery(t, api, q.query)
					if got != q.want {
						time.Sleep(200 * time.Millisecond)
						return false
					}
					return true
				}, func() string { return fmt.Sprintf("it has %v", got) }, output)
			}
			// The compact records came where the counters had no room,
			// and only there.
			compact := strings.Contains(proc.output(), "the calls -sample leaves out go to trace one by one")
			if compact != (c.args != nil) {
				t.Errorf("trace -v says the calls left out come one by one: %v, want %v\n%s", compact, c.args != nil, output())
			}
		})
	}
}
