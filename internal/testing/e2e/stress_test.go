package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// TestStress runs testdata/stress, every function instrumented and two
// usdtgen probes, for a while under many goroutines, deep recursion, GC,
// asynchronous preemption and CPU profiling, while bpftrace attaches to
// all its probes by PID, counts their fires, detaches and attaches again.
// The traced run must print what an untraced run prints and exit the same
// way. A second build with the race detector, on the cgo route, does the
// same for a shorter time.
func TestStress(t *testing.T) {
	tracetest.RequireAttach(t)
	dir := fixture(t, "stress")
	rules := usdtToolexec("-rules", filepath.Join(dir, "rules.yml"))
	t.Run("plan9", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "stress")
		goCmd(t, dir, []string{"CGO_ENABLED=0"}, "build", "-o", bin, rules, ".")
		stress(t, bin, 35*time.Second, 3)
	})
	t.Run("cgo-race", func(t *testing.T) {
		tracetest.Require(t, "gcc")
		bin := filepath.Join(t.TempDir(), "stress")
		goCmd(t, dir, []string{"CGO_ENABLED=1"}, "build", "-race", "-o", bin, rules, ".")
		stress(t, bin, 25*time.Second, 2)
	})
}

// attachTime bounds one bpftrace attach, detach included, on a loaded
// machine: its 3 s interval plus up to 7 s attaching.
const attachTime = 10 * time.Second

// stress runs bin untraced once, then for dur under repeated bpftrace
// attaches, at least minAttaches of them, and compares the two runs.
func stress(t *testing.T, bin string, dur time.Duration, minAttaches int) {
	want, wantErr := exec.Command(bin).CombinedOutput()
	if !bytes.HasPrefix(want, []byte("started\nchecksum ")) {
		t.Fatalf("untraced run: %v\n%s", wantErr, want)
	}
	// The probes whose sites the kernel should have optimized by the time
	// bpftrace has run a second: the hottest ones, automatic and usdtgen.
	sites := map[string]uint64{}
	for _, n := range readelfNotes(t, bin) {
		if n.name == "entry__main__leaf" || n.name == "exit__main__leaf" || n.name == "step" {
			sites[n.name], _ = strconv.ParseUint(n.pc, 0, 64)
		}
	}
	if len(sites) != 3 {
		t.Fatalf("%s: want the leaf and step probes, found %v", bin, sites)
	}

	profile := filepath.Join(t.TempDir(), "cpu.prof")
	cmd := exec.Command(bin, "-for", dur.String(), "-cpuprofile", profile)
	// A file, not a pipe: Wait then returns when the program ends, not
	// when every holder of the pipe has closed it.
	outFile, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	if kernelOptimizesUprobes() {
		optimizedByTrace(t, cmd.Process.Pid, sites)
	}
	script := fmt.Sprintf(`usdt:%s:*:* { @fires = count(); }
BEGIN { printf("attached\n"); }
interval:s:3 { exit(); }`, bin)
	// Attach only while the program surely runs for the whole attach:
	// bpftrace -p does not notice a program that ends while it attaches,
	// and counts nothing.
	attaches := 0
	for time.Since(started) < dur-attachTime {
		// bpftrace attaches at the notes' addresses, the 1-byte NOPs,
		// which every kernel emulates after the breakpoint.
		out, err := bpftraceAttached(cmd.Process.Pid, script, func() {
			checkSites(t, cmd.Process.Pid, sites, []byte{0xcc, 0x0f}, "while bpftrace is attached")
		})
		if err != nil {
			t.Fatal(err)
		}
		checkSites(t, cmd.Process.Pid, sites, nopPair, "after bpftrace detached")
		fires := counter(t, out, "fires", true)
		if fires == 0 {
			t.Fatalf("attach %d, %v after the start, counted no fire:\n%s", attaches+1, time.Since(started).Round(time.Second), out)
		}
		attaches++
		t.Logf("attach %d: %d fires", attaches, fires)
	}
	var gotErr error
	select {
	case gotErr = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the program has not ended 3 minutes after its last attach")
	}
	if !exitedAlike(wantErr, gotErr) {
		t.Errorf("traced run exited with %v, untraced with %v", gotErr, wantErr)
	}
	if got, err := os.ReadFile(outFile.Name()); err != nil || string(got) != string(want) {
		t.Errorf("traced run printed (%v)\n%s\nuntraced\n%s", err, got, want)
	}
	if attaches < minAttaches {
		t.Errorf("bpftrace attached %d times in %v, want at least %d", attaches, dur, minAttaches)
	}
	if data, err := os.ReadFile(profile); err != nil || !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Errorf("CPU profile: %v, %d bytes, want a gzipped profile", err, len(data))
	}
	if !kernelOptimizesUprobes() {
		t.Logf("this kernel does not optimize uprobes on a 5-byte NOP (no arch_uprobe_optimize and sys_uprobe in /proc/kallsyms): the stress ran on the trap path")
	}
}

// optimizedByTrace attaches usdt-toolexec trace to sites of the running
// pid on a kernel that optimizes uprobes: it must attach
// at the 5-byte NOPs, which the kernel then turns into calls while the
// 1-byte NOPs stay, and leave the NOPs as they were when it ends.
func optimizedByTrace(t *testing.T, pid int, sites map[string]uint64) {
	t.Helper()
	args := []string{"-v", "-p", strconv.Itoa(pid)}
	for name := range sites {
		args = append(args, "*:"+name)
	}
	tr, attached, trErr := traceAttached(t, nil, args...)
	if !strings.Contains(attached, "at the 5-byte NOPs") {
		t.Fatalf("usdt-toolexec trace -v does not say it attached at the 5-byte NOPs on a kernel that optimizes them: %s", attached)
	}
	go io.Copy(io.Discard, trErr)
	checkSites(t, pid, sites, []byte{0x90, 0xe8}, "while usdt-toolexec trace is attached")
	tr.Process.Signal(os.Interrupt)
	if err := tr.Wait(); err != nil {
		t.Errorf("usdt-toolexec trace: %v", err)
	}
	checkSites(t, pid, sites, nopPair, "after usdt-toolexec trace detached")
}

// exitedAlike reports whether two runs ended with the same exit status.
func exitedAlike(a, b error) bool {
	var ea, eb *exec.ExitError
	if errors.As(a, &ea) && errors.As(b, &eb) {
		return ea.ExitCode() == eb.ExitCode()
	}
	return a == nil && b == nil
}

// bpftraceAttached runs script against pid, calls attached once bpftrace
// has printed "attached" (from BEGIN, which runs after every probe is
// attached) and returns everything bpftrace printed.
func bpftraceAttached(pid int, script string, attached func()) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bpftrace", "-p", strconv.Itoa(pid), "-e", script)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	var b strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if sc.Text() == "attached" {
			attached()
		}
	}
	err = cmd.Wait()
	b.WriteString(errBuf.String())
	if err != nil {
		return b.String(), fmt.Errorf("bpftrace -p %d: %v\n%s", pid, err, b.String())
	}
	return b.String(), nil
}

// kernelOptimizesUprobes reports whether the kernel replaces a uprobe on a
// 5-byte NOP with a call into a trampoline after its first hit (x86-64,
// Linux 6.18 and later).
func kernelOptimizesUprobes() bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		return false
	}
	return regexp.MustCompile(`(?m) arch_uprobe_optimize$`).Match(data) && regexp.MustCompile(`(?m) __x64_sys_uprobe$`).Match(data)
}

// nopPair is the probe site on amd64: the 1-byte NOP the note points at,
// then the 5-byte NOP a kernel can optimize.
var nopPair = []byte{0x90, 0x0f, 0x1f, 0x44, 0x00, 0x00}

// checkSites waits up to two seconds for every site in pid's memory to
// start with want: the breakpoint (0xcc) a uprobe writes, the call (0xe8)
// the kernel writes over an optimized 5-byte NOP, or the NOPs themselves
// once no probe is attached.
func checkSites(t *testing.T, pid int, sites map[string]uint64, want []byte, when string) {
	t.Helper()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Logf("cannot read the sites: %v", err)
		return
	}
	defer mem.Close()
	got := map[string]string{}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok := true
		for name, pc := range sites {
			b := make([]byte, len(nopPair))
			if _, err := mem.ReadAt(b, int64(pc)); err != nil {
				// The program has exited.
				return
			}
			got[name] = fmt.Sprintf("% x", b)
			ok = ok && bytes.HasPrefix(b, want)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s, the probe sites are %v, want each to start with % x", when, got, want)
			return
		}
	}
}
