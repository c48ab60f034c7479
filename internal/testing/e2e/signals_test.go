package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// The tests of issue 50's promise that a tracer never harms the program
// it traces, for the ring: the program's signals work as they do
// untraced, and a stopped tracer stops nothing.

// procStat returns process pid's state letter and CPU time, from
// /proc/PID/stat; ok is false once it is gone.
func procStat(pid int) (state byte, cpu time.Duration, ok bool) {
	return statFile(fmt.Sprintf("/proc/%d/stat", pid))
}

// statFile is procStat for a process's or a thread's stat file.
func statFile(file string) (state byte, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, false
	}
	// Past the command's name: state, then utime and stime, in clock
	// ticks (USER_HZ, 100), as the 12th and 13th fields.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 || f[0] == "Z" {
		return 0, 0, false
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return f[0][0], time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// stoppedState reports whether a process's state letter is a stop: T,
// or t (a tracee's, which a group stop it is held in under ptrace is).
func stoppedState(s byte) bool { return s == 'T' || s == 't' }

// waitFor polls cond every 10 ms until it holds, or fails the test with
// what after timeout, and what show says, if given.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, show ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout * time.Duration(tracetest.TimeSlack))
	for !cond() {
		if time.Now().After(deadline) {
			shown := ""
			for _, f := range show {
				shown += "\n" + f()
			}
			t.Fatalf("%s: not within %v%s", what, timeout, shown)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPid waits for the fixture's -pidfile.
func readPid(t *testing.T, file string) int {
	t.Helper()
	pid := 0
	waitFor(t, 30*time.Second, "the program's pid file", func() bool {
		b, _ := os.ReadFile(file)
		pid, _ = strconv.Atoi(string(b))
		return pid > 0
	})
	return pid
}

// checkStopped checks that process pid is stopped and uses no CPU for a
// second, and then, after a SIGCONT, that it runs again.
func checkStopped(t *testing.T, pid int, sig syscall.Signal, others ...int) {
	t.Helper()
	// Every thread stopped, and the process's CPU time still over 200 ms:
	// a tracee shows t from the stop that tells its tracer of the
	// signal, a moment before it stops for it, and its other threads
	// stop one after the other, later on a loaded machine.
	last := time.Duration(-1)
	waitFor(t, 5*time.Second, fmt.Sprintf("process %d stopped by %s", pid, unix.SignalName(sig)), func() bool {
		s, cpu, _ := procStat(pid)
		if !stoppedState(s) || !threadsStopped(pid) {
			last = -1
			return false
		}
		settled := cpu == last
		last = cpu
		if !settled {
			time.Sleep(200 * time.Millisecond)
		}
		return settled
	})
	_, before, _ := procStat(pid)
	time.Sleep(time.Second)
	state, after, _ := procStat(pid)
	if state == 0 {
		t.Errorf("process %d, stopped by %s, ended", pid, unix.SignalName(sig))
	} else if !stoppedState(state) || after != before {
		t.Errorf("process %d, stopped by %s, is in state %c and used %v of CPU in the next second, want stopped and none", pid, unix.SignalName(sig), state, after-before)
	}
	for _, o := range others {
		if s, _, ok := procStat(o); ok && s != 'T' {
			t.Errorf("process %d is in state %c while process %d is stopped by %s, want T", o, s, pid, unix.SignalName(sig))
		}
	}
}

// threadsStopped reports whether every thread of process pid is stopped.
func threadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		if s, _, ok := statFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name())); ok && !stoppedState(s) {
			return false
		}
	}
	return true
}

// checkRuns checks that process pid uses CPU within 2 s.
func checkRuns(t *testing.T, pid int, why string) {
	t.Helper()
	_, before, _ := procStat(pid)
	waitFor(t, 2*time.Second, fmt.Sprintf("process %d running again after %s", pid, why), func() bool {
		_, now, ok := procStat(pid)
		return !ok || now > before
	})
}

var (
	// ended matches the fixture's last line.
	ended = regexp.MustCompile(`calls=(\d+) conts=(\d+)`)
	// exitStatus matches the shell's echo of $?.
	exitStatus = regexp.MustCompile(`(?m)^status=(\d+)`)
)

// TestRingCommandSignals stops and continues a program traced through
// the ring (-- CMD) with SIGSTOP, then SIGTSTP, and each SIGCONT: it
// stops (using no CPU) and runs again as it does untraced, takes each
// SIGCONT once, and trace exits with its status; its calls are counted,
// its first ones too.
func TestRingCommandSignals(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "signals")
	run := func(t *testing.T, trace bool) (out string, status int) {
		pidfile := filepath.Join(t.TempDir(), "pid")
		args := []string{"-pidfile", pidfile, "-cpu", "1500ms", "-exit", "3"}
		cmd := exec.Command(bin, args...)
		if trace {
			cmd = exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), append([]string{"trace", "-transport", "ring", "-stats", "--", bin}, args...)...)
		}
		var outBuf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
		// A process group of its own that is not orphaned: the
		// kernel discards SIGTSTP sent to an orphaned one.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pid := readPid(t, pidfile)
		for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGTSTP} {
			time.Sleep(200 * time.Millisecond)
			syscall.Kill(pid, sig)
			checkStopped(t, pid, sig)
			syscall.Kill(pid, syscall.SIGCONT)
			checkRuns(t, pid, "SIGCONT")
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(60 * time.Second * time.Duration(tracetest.TimeSlack)):
			t.Fatalf("did not end:\n%s", outBuf.String())
		}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return outBuf.String(), cmd.ProcessState.ExitCode()
	}
	var untraced, traced string
	var untracedStatus, tracedStatus int
	t.Run("untraced", func(t *testing.T) { untraced, untracedStatus = run(t, false) })
	t.Run("traced", func(t *testing.T) { traced, tracedStatus = run(t, true) })
	u, tr := ended.FindStringSubmatch(untraced), ended.FindStringSubmatch(traced)
	if u == nil || tr == nil {
		t.Fatalf("the program did not end as it should:\nuntraced:\n%s\ntraced:\n%s", untraced, traced)
	}
	if u[2] != "2" || tr[2] != u[2] {
		t.Errorf("the program took %s SIGCONTs traced and %s untraced, want 2", tr[2], u[2])
	}
	if untracedStatus != 3 || tracedStatus != untracedStatus {
		t.Errorf("exit status %d traced and %d untraced, want 3", tracedStatus, untracedStatus)
	}
	if got := strconv.Itoa(statCounts(traced)["main.step"]); got != tr[1] {
		t.Errorf("trace counted %s calls of step, the program made %s:\n%s", got, tr[1], traced)
	}
}

// tmux drives a shell in a terminal of its own, as a person would.
type tmux struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T) *tmux {
	t.Helper()
	tracetest.Require(t, "tmux", "bash")
	m := &tmux{t: t, sock: filepath.Join(t.TempDir(), "tmux")}
	m.run("new-session", "-d", "-x", "200", "-y", "50", "env", "PS1=$ ", "bash", "--norc", "--noprofile")
	t.Cleanup(func() { exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	return m
}

func (m *tmux) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", m.sock}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the terminal shows, and what scrolled past.
func (m *tmux) screen() string { return m.run("capture-pane", "-p", "-S", "-100") }

// TestRingCommandCtrlZ runs trace -- CMD in a shell on a terminal and
// types Ctrl-Z: the job stops, trace and the program with it, as an
// untraced program's does; fg continues both, and the program ends with
// its own status, having taken one SIGCONT.
func TestRingCommandCtrlZ(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "signals")
	m := newTmux(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	m.run("send-keys", fmt.Sprintf("%s trace -transport ring -stats -- %s -pidfile %s -cpu 2s -exit 3", filepath.Join(toolsDir, "usdt-toolexec"), bin, pidfile), "Enter")
	pid := readPid(t, pidfile)
	time.Sleep(300 * time.Millisecond)
	m.run("send-keys", "C-z")
	// trace, the program's parent, stops too: the shell waits for it.
	checkStopped(t, pid, syscall.SIGTSTP, parentOf(t, pid))
	waitFor(t, 2*time.Second, "the shell saying the job stopped", func() bool { return strings.Contains(m.screen(), "Stopped") }, m.screen)
	m.run("send-keys", "fg", "Enter")
	checkRuns(t, pid, "fg")
	waitFor(t, 60*time.Second, "the program's end", func() bool { return ended.MatchString(m.screen()) }, m.screen)
	m.run("send-keys", "echo status=$?", "Enter")
	waitFor(t, 10*time.Second, "the job's end", func() bool { return exitStatus.MatchString(m.screen()) }, m.screen)
	screen := m.screen()
	if st := exitStatus.FindStringSubmatch(screen); st[1] != "3" {
		t.Errorf("trace did not exit with the program's status, 3:\n%s", screen)
	}
	if e := ended.FindStringSubmatch(screen); e == nil || e[2] != "1" {
		t.Errorf("the program did not take one SIGCONT:\n%s", screen)
	}
	if statCounts(screen)["main.step"] == 0 {
		t.Errorf("trace counted no call of step:\n%s", screen)
	}
}

// parentOf returns the parent of process pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestRingAttachedTracerStopped stops a ring trace of a running process
// (-p) with SIGSTOP for 5 s, while the process collects garbage in a
// loop (every collection preempts the other goroutines with a signal)
// and calls a probed function on its first thread: that thread runs on
// throughout, using CPU every second, and the process ends its work in
// its time.
func TestRingAttachedTracerStopped(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "signals")
	prog, stdin, out := startReady(t, bin, "-wait", "-gc", "-for", "7s")
	pid := prog.Process.Pid
	tr, _, _ := traceAttached(t, io.Discard, "-v", "-transport", "ring", "-stats", "-p", strconv.Itoa(pid))
	fmt.Fprintln(stdin)
	runsWhileStopped(t, tr.Process, pid)
	done := make(chan string, 1)
	go func() {
		line, _ := out.ReadString('\n')
		done <- line
	}()
	select {
	case line := <-done:
		if !ended.MatchString(line) {
			t.Errorf("the program printed %q, want its calls", line)
		}
	case <-time.After(30 * time.Second * time.Duration(tracetest.TimeSlack)):
		t.Fatal("the program did not end its 7 s of work within 30 s")
	}
	if err := prog.Wait(); err != nil {
		t.Errorf("the program: %v", err)
	}
	tr.Process.Kill()
	tr.Wait()
}

// TestRingAttachedStatsExit counts the calls of a running process (-p
// -stats) that then exits on its own: trace counts what it read at its
// last poll, at least every call made a second before the exit and at
// most all of them, and says how long before the exit it last read.
func TestRingAttachedStatsExit(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "signals")
	prog, stdin, out := startReady(t, bin, "-wait", "-calls", "200000", "-idle", "1s", "-burst", "100000")
	var stats strings.Builder
	tr, _, errs := traceAttached(t, &stats, "-v", "-transport", "ring", "-stats", "-p", strconv.Itoa(prog.Process.Pid))
	var log strings.Builder
	logged := make(chan struct{})
	go func() { io.Copy(&log, errs); close(logged) }()
	fmt.Fprintln(stdin)
	line, _ := out.ReadString('\n')
	if err := prog.Wait(); err != nil || !ended.MatchString(line) {
		t.Fatalf("the program printed %q: %v", line, err)
	}
	<-logged
	if err := tr.Wait(); err != nil {
		t.Fatalf("trace: %v\n%s%s", err, stats.String(), log.String())
	}
	got := statCounts(stats.String())["main.step"]
	if got < 200000 || got > 300000 {
		t.Errorf("trace counted %d calls of step, want the 200,000 made a second before the exit, and at most the 100,000 after:\n%s%s", got, stats.String(), log.String())
	}
	m := regexp.MustCompile(`process \d+ exited (\S+) after trace last read its ring`).FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("trace does not say how long before the exit it last read:\n%s", log.String())
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d > time.Second {
		t.Errorf("trace last read %s before the exit, want at most its poll's interval (250ms):\n%s", m[1], log.String())
	}
}

// TestRingCommandTracerStopped stops a ring trace of its command (--
// CMD) with SIGSTOP for 5 s, while the command collects garbage in a
// loop (every collection preempts the other goroutines with a signal,
// which a tracee takes through its tracer) and calls a probed function
// on its first thread: that thread runs on throughout, using CPU every
// second, and the command ends its work in its time, with its status.
func TestRingCommandTracerStopped(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "signals")
	dir := t.TempDir()
	pidfile, outfile := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	out, err := os.Create(outfile)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "trace", "-v", "-transport", "ring", "-stats", "--", bin, "-pidfile", pidfile, "-gc", "-for", "7s", "-exit", "3")
	tr.Stdout, tr.Stderr = out, out
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	pid := readPid(t, pidfile)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); tr.Process.Kill() })
	runsWhileStopped(t, tr.Process, pid)
	select {
	case err = <-done:
	case <-time.After(30 * time.Second * time.Duration(tracetest.TimeSlack)):
		b, _ := os.ReadFile(outfile)
		t.Fatalf("trace did not end within 30 s of the command's 7 s:\n%s", b)
	}
	b, _ := os.ReadFile(outfile)
	if !ended.Match(b) {
		t.Errorf("the command did not end its work:\n%s", b)
	}
	if code := tr.ProcessState.ExitCode(); code != 3 {
		t.Errorf("trace exited with %d (%v), want the command's 3:\n%s", code, err, b)
	}
	t.Logf("%s", b)
}

// runsWhileStopped stops tracer with SIGSTOP for 5 s, 300 ms into the
// fixture's 7 s of calls, and checks that the first thread of process
// pid, which makes them, uses CPU in every second of it; then it
// continues the tracer.
func runsWhileStopped(t *testing.T, tracer *os.Process, pid int) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	if err := tracer.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer tracer.Signal(syscall.SIGCONT)
	leader := fmt.Sprintf("/proc/%d/task/%d/stat", pid, pid)
	_, last, _ := statFile(leader)
	for i := range 5 {
		time.Sleep(time.Second)
		_, now, ok := statFile(leader)
		if !ok {
			t.Fatalf("process %d ended %d s into its tracer's stop, before its 7 s", pid, i+1)
		}
		if now-last < 100*time.Millisecond {
			t.Errorf("the first thread of process %d, which calls step, used %v of CPU in second %d of its tracer's stop, want it running", pid, now-last, i+1)
		}
		last = now
	}
}

// TestRingCommandKilledInJobStop stops a ring trace of its command (--
// CMD) and the command as Ctrl-Z does (SIGTSTP to both), which sets the
// trace's lease to a day, and kills the stopped trace: its holder runs
// the lease out, so that the command, continued, turns its probes off at
// its next call, its semaphores' slots back at 0 within 2 s. The command
// ignores SIGHUP, as a daemon does: the kernel sends one to the stopped
// job that its parent's death orphans.
func TestRingCommandKilledInJobStop(t *testing.T) {
	requireRing(t)
	bin := buildFixtureRules(t, "signals")
	pidfile := filepath.Join(t.TempDir(), "pid")
	tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "trace", "-transport", "ring", "-stats", "--", bin, "-pidfile", pidfile, "-nohup", "-for", "60s")
	// Stdout and stderr are /dev/null: a pipe would have Wait wait for
	// the command, which holds it, after trace's death.
	// A process group of its own that is not orphaned, as a shell's
	// job: the kernel discards SIGTSTP sent to an orphaned one.
	tr.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, pidfile)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); tr.Process.Kill(); tr.Wait() })
	sems := semaphores(t, bin)
	waitFor(t, 5*time.Second, "the probes on", func() bool { return allAre(readUints(t, pid, sems, 4), 1<<16) })
	// Ctrl-Z: the job's process group takes SIGTSTP.
	syscall.Kill(-tr.Process.Pid, syscall.SIGTSTP)
	waitFor(t, 5*time.Second, "trace stopped", func() bool { s, _, _ := procStat(tr.Process.Pid); return stoppedState(s) })
	tr.Process.Kill()
	tr.Wait()
	syscall.Kill(pid, syscall.SIGCONT)
	killed := time.Now()
	waitFor(t, 2*time.Second, "the command's semaphores' slots at 0 after its job-stopped trace was killed", func() bool {
		return allAre(readUints(t, pid, sems, 4), 0)
	}, func() string { return fmt.Sprintf("slots %#x", readUints(t, pid, sems, 4)) })
	t.Logf("the probes went off %v after the SIGCONT", time.Since(killed).Round(time.Millisecond))
}
