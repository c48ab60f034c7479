// Package tracetest lets end-to-end tests decide whether this machine can
// run the real USDT consumers (bpftrace, bcc's tplist, gdb, perf, readelf)
// and skip, saying why, when it cannot. A test that needs a consumer must
// never pass silently without one: it calls Require or RequireAttach first.
package tracetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TracefsDir is where bpftrace and perf expect tracefs. Without it bpftrace
// attaches but fails to detach ("detach error"), and perf probe fails.
const TracefsDir = "/sys/kernel/tracing"

// Have reports whether tool is on PATH.
func Have(tool string) bool {
	_, err := exec.LookPath(tool)
	return err == nil
}

// Require skips the test unless every tool is on PATH.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if !Have(tool) {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Skipf("tracetest: %s not found on PATH (on Debian, scripts/setup.sh installs every tracer the tests use)",
			strings.Join(missing, ", "))
	}
}

var mountMu sync.Mutex

// MountTracefs mounts tracefs on TracefsDir unless it is mounted already.
func MountTracefs() error {
	mountMu.Lock()
	defer mountMu.Unlock()
	if tracefsMounted() {
		return nil
	}
	out, err := exec.Command("mount", "-t", "tracefs", "nodev", TracefsDir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount -t tracefs nodev %s: %v: %s", TracefsDir, err, bytes.TrimSpace(out))
	}
	if !tracefsMounted() {
		return fmt.Errorf("tracefs still not mounted on %s after mount", TracefsDir)
	}
	return nil
}

func tracefsMounted() bool {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == TracefsDir && f[2] == "tracefs" {
			return true
		}
	}
	return false
}

var (
	attachOnce sync.Once
	attachErr  error
)

// RequireAttach skips the test unless bpftrace can really attach a uprobe
// here: bpftrace present, tracefs mounted (mounting it if needed), and the
// kernel and privileges allow BPF uprobes. The check runs once per process;
// later calls reuse its answer.
func RequireAttach(t testing.TB) {
	t.Helper()
	Require(t, "bpftrace")
	attachOnce.Do(func() { attachErr = tryAttach() })
	if attachErr != nil {
		t.Skipf("tracetest: bpftrace cannot attach probes on this machine: %v", attachErr)
	}
}

// attachProgram is a tiny Go program with a symbol to put a uprobe on. The
// test binary itself will not do: go test links it without a symbol table,
// and bpftrace places uprobes by symbol.
const attachProgram = `package main

import "time"

//go:noinline
func target(i int) int { return i*7 + 1 }

func main() {
	s := 0
	for i := 0; i < 2000; i++ {
		s += target(i)
		time.Sleep(5 * time.Millisecond)
	}
	println(s)
}
`

func tryAttach() error {
	if err := MountTracefs(); err != nil {
		return err
	}
	// go test puts $GOROOT/bin first on the test's PATH.
	gotool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("no go command to build the uprobe target: %v", err)
	}
	dir, err := os.MkdirTemp("", "tracetest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(attachProgram), 0o644); err != nil {
		return err
	}
	bin := filepath.Join(dir, "attachcheck")
	build := exec.Command(gotool, "build", "-o", bin, "main.go")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=on", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the uprobe target: %v\n%s", err, out)
	}
	script := fmt.Sprintf(`uprobe:%s:main.target { printf("tracetest-hit\n"); exit(); }`, bin)
	out, err := Output(60*time.Second, nil, "bpftrace", "-e", script, "-c", bin)
	if strings.Contains(out, "tracetest-hit") {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("bpftrace -e %q -c %s: no hit reported\n%s", script, bin, out)
	}
	return err
}

// filterNoise drops bpftrace's RLIMIT_MEMLOCK warning, harmless on these
// kernels (BPF memory is cgroup-accounted) but confusing in a skip reason.
func filterNoise(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "RLIMIT_MEMLOCK") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// PerfEnv returns os.Environ() adjusted so that perf keeps its build-id
// cache (and the SDT events it derives from it) under dir instead of the
// user's ~/.debug, isolating tests from each other and from the user.
func PerfEnv(dir string) []string {
	env := []string{"HOME=" + dir, "PERF_BUILDID_DIR=" + filepath.Join(dir, ".debug")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PERF_BUILDID_DIR=") {
			env = append(env, kv)
		}
	}
	return env
}

// Output runs name with args under a timeout and returns its combined
// output; a failure or timeout is reported in the error with the output.
func Output(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	// A traced child inherits the pipes: do not wait forever for them.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	s := filterNoise(string(out))
	if ctx.Err() != nil {
		return s, fmt.Errorf("%s %s: timed out after %v\n%s", name, strings.Join(args, " "), timeout, s)
	}
	if err != nil {
		return s, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, s)
	}
	return s, nil
}
