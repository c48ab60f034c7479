// Package tracetest lets end-to-end tests decide whether this machine can
// run the real USDT consumers (bpftrace, bcc's tplist, gdb, perf, readelf)
// and skip, saying why, when it cannot; in CI ($CI set) a missing
// consumer fails the test instead (SkipMissing). A test that needs a
// consumer must never pass silently without one: it calls Require or
// RequireAttach first.
package tracetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// Require skips the test unless every tool is on PATH (in CI it fails
// it: SkipMissing).
func Require(t testing.TB, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if !Have(tool) {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		SkipMissing(t, "tracetest: %s not found on PATH (on Debian, scripts/setup.sh installs every tracer the tests use)",
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
	return mountType(TracefsDir) == "tracefs"
}

// mountType returns the type of the file system mounted on dir, "" if none.
func mountType(dir string) string {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	typ := ""
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == dir {
			typ = f[2] // the last mount on dir is the visible one
		}
	}
	return typ
}

// RequireAttach skips the test unless the host's bpftrace can really attach
// a uprobe here (see Bpftrace.RequireAttach).
func RequireAttach(t testing.TB) {
	t.Helper()
	Host.RequireAttach(t)
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

// AttachTargetEnv names a prebuilt attachProgram for tryAttach, for
// machines without a Go toolchain (the test VMs): BuildAttachTarget
// builds it.
const AttachTargetEnv = "USDT_TRACETEST_TARGET"

// BuildAttachTarget builds the program RequireAttach puts a uprobe on into
// dir, for goarch ("" for the host's), and returns its path.
func BuildAttachTarget(dir, goarch string) (string, error) {
	// go test puts $GOROOT/bin first on the test's PATH.
	gotool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build the uprobe target: %v", err)
	}
	src := filepath.Join(dir, "attachcheck.go")
	if err := os.WriteFile(src, []byte(attachProgram), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "attachcheck")
	build := exec.Command(gotool, "build", "-o", bin, src)
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=on", "GOFLAGS=")
	if goarch != "" {
		build.Env = append(build.Env, "GOARCH="+goarch)
	}
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the uprobe target: %v\n%s", err, out)
	}
	return bin, nil
}

func tryAttach(b Bpftrace) error {
	if err := MountTracefs(); err != nil {
		return err
	}
	bin := os.Getenv(AttachTargetEnv)
	if bin == "" {
		dir, err := os.MkdirTemp("", "tracetest-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if bin, err = BuildAttachTarget(dir, ""); err != nil {
			return err
		}
	}
	script := fmt.Sprintf(`uprobe:%s:main.target { printf("tracetest-hit\n"); exit(); }`, bin)
	out, err := b.Output(60*time.Second, "", "-e", script, "-c", bin)
	if strings.Contains(out, "tracetest-hit") {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("bpftrace -e %q -c %s: no hit reported\n%s", script, bin, out)
	}
	return err
}

// filterNoise drops what bpftrace says about this machine rather than about
// the script: the RLIMIT_MEMLOCK warning, harmless on these kernels (BPF
// memory is cgroup-accounted), and bpftrace 0.27's warning that it cannot
// read available_filter_functions (the kernel refuses it here even to
// root; it only matters for kprobes).
func filterNoise(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "RLIMIT_MEMLOCK") && !strings.HasPrefix(l, "WARNING: Could not read functions from ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TimeSlack multiplies the time limits of the consumers' runs, and the
// upper bounds tests put on elapsed times: a machine under emulation (the
// test VMs under TCG) runs 10 to 50 times slower than the host, and its
// sleeps overshoot as much. $USDT_TIME_SLACK sets it; 1 without.
var TimeSlack = func() int64 {
	n, err := strconv.ParseInt(os.Getenv(TimeSlackEnv), 10, 64)
	if err != nil || n < 1 {
		return 1
	}
	return n
}()

// TimeSlackEnv is the variable that sets TimeSlack.
const TimeSlackEnv = "USDT_TIME_SLACK"

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
	return output(timeout, func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		return cmd
	})
}

func output(timeout time.Duration, command func(context.Context) *exec.Cmd) (string, error) {
	timeout *= time.Duration(TimeSlack)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := command(ctx)
	// A traced child inherits the pipes: do not wait forever for them.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	s := filterNoise(string(out))
	if ctx.Err() != nil {
		return s, fmt.Errorf("%s: timed out after %v\n%s", strings.Join(cmd.Args, " "), timeout, s)
	}
	if err != nil {
		return s, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, s)
	}
	return s, nil
}

// NobodyDir returns a new directory that every user may enter and read,
// for copies of binaries that a test runs as nobody (setpriv): a test's
// own temporary directories are its user's alone. It is removed when the
// test ends.
func NobodyDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "usdt-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
