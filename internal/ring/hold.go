package ring

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-usdt/usdt/internal/ringlayout"
	"golang.org/x/sys/unix"
)

// Hold keeps a traced process's memory until the tracer has read its
// buffers: a process's memory is gone the moment it exits, with the
// events its last fires wrote. The command Start starts is seized
// (PTRACE_SEIZE) before it runs its executable; it stops when it exits
// (PTRACE_EVENT_EXIT), and Hold tells Exiting, and lets it go on once
// Drained. Its signals are passed on at once, and its job control
// stops (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU) stop it, until a SIGCONT,
// as without a tracer (PTRACE_LISTEN).
//
// The command is followed into the processes it starts: every thread of
// it and of them is traced, so that each fork, and each exec, stops
// where the tracer sees it (Children).
//
// The ptrace calls come from a process of their own, the holder (this
// program again, in a process group of its own, see holder.go), and not
// from the tracer: a tracee waits at each ptrace stop, at every signal,
// until its tracer lets it go on, and a tracer that is stopped (SIGSTOP,
// Ctrl-Z of trace alone), starved or blocked must never stop the
// program. The holder passes signals on by itself, and waits for the
// tracer (Resume, Drained, a Child's Go) only while the tracer beats
// (Beat): two seconds without a beat, and the program goes on. A holder
// whose tracer dies lets go of every process, and exits.
type Hold struct {
	Pid int
	// Exiting is closed when the process stopped at its exit.
	Exiting chan struct{}
	// Done is closed when the process is no longer held: only then may
	// its parent wait for it.
	Done chan struct{}
	// Children has, for a command Start started, each process of its
	// that has just run an executable, and each such process (but the
	// command's) at its exit: stopped, until the tracer says Go.
	Children chan *Child
	// ignore is closed when the tracer no longer takes Children.
	ignore     chan struct{}
	ignoreOnce sync.Once
	drainOnce  sync.Once
	resumeOnce sync.Once
	// conn is the holder's socket; nil for an Unheld process.
	conn *holderConn
	// beat is when the tracer last beat, in Unix ns, and 0 until it
	// first does: till then it is setting up, and beats.
	beat atomic.Int64
}

// Child is a process of the command's, stopped at an exec or its exit.
type Child struct {
	Pid int
	// Exec says that the process has just run an executable; else it is
	// exiting, and its memory still there.
	Exec bool
	on   chan struct{}
}

// Go lets the child go on.
func (c *Child) Go() { close(c.on) }

// follow is what a command's tracee stops at: the command's forks,
// vforks, threads and execs too.
// System call stops (of the processes stepped to their exec) say so in
// their signal (TRACESYSGOOD).
const follow = unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACESYSGOOD

// execEnv is set, in the environment of the process that Start starts,
// to the executable that process is to run once it is seized: it starts
// as this program (/proc/self/exe), which says so with a byte on fd 3, a
// socket, and waits for one back (execSeized). A process cannot be
// seized before its first instruction otherwise: PTRACE_TRACEME, which
// os/exec offers, makes a tracee whose group stops look like signals,
// and that PTRACE_LISTEN refuses. Its first byte tells that its own exec
// is over: os/exec returns before a new process's exec has ended, and a
// seize then would see the end of that exec as the command's.
const execEnv = "USDT_RING_EXEC"

// ptracerEnv is set, with execEnv, to the holder's process id, which
// the process names as its tracer (PR_SET_PTRACER): under Yama's
// ptrace_scope 1, only a process's ancestors may seize it otherwise.
const ptracerEnv = "USDT_RING_PTRACER"

func init() {
	if _, ok := os.LookupEnv(holderEnv); ok {
		runHolder()
	}
	if path, ok := os.LookupEnv(execEnv); ok {
		execSeized(path)
	}
}

// execSeized runs path, with this process's arguments and environment
// (without execEnv), once the tracer has seized it.
func execSeized(path string) {
	os.Unsetenv(execEnv)
	if tracer, err := strconv.Atoi(os.Getenv(ptracerEnv)); err == nil {
		// Without Yama, EINVAL: any process of the user's may.
		unix.Prctl(unix.PR_SET_PTRACER, uintptr(tracer), 0, 0, 0)
	}
	os.Unsetenv(ptracerEnv)
	unix.CloseOnExec(3)
	b := []byte{1}
	if n, _ := unix.Write(3, b); n == 1 {
		unix.Read(3, b)
	}
	if b[0] != 2 {
		// The tracer is gone: the command does not run untraced.
		os.Exit(127)
	}
	err := syscall.Exec(path, os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "usdt-toolexec trace: %s: %v\n", path, err)
	os.Exit(127)
}

// Start starts cmd, stopped at its exec, before its first instruction,
// until Resume: the ring must be on before the program's first probe
// fires. cmd must not have ExtraFiles. letGo is told of each process of
// the command's that is let go untraced, as it is about to run an
// executable that gains privileges (path, as the process named it).
func Start(cmd *exec.Cmd, letGo func(pid int, path string)) (*Hold, error) {
	if privileged(cmd.Path) && !capable() {
		return nil, fmt.Errorf("%s gains privileges when it runs (setuid, setgid or file capabilities), which it would not under trace: trace it as root, or with -p once it runs", cmd.Path)
	}
	hc, err := startHolder()
	if err != nil {
		return nil, fmt.Errorf("starting the process that holds %s: %w", cmd.Args[0], err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		hc.close()
		return nil, err
	}
	mine, its := os.NewFile(uintptr(fds[0]), "seize"), os.NewFile(uintptr(fds[1]), "seized")
	defer mine.Close()
	defer its.Close()
	cmd.Env = append(cmd.Environ(), execEnv+"="+cmd.Path, ptracerEnv+"="+strconv.Itoa(hc.pid()))
	cmd.Path, cmd.Err = "/proc/self/exe", nil
	cmd.ExtraFiles = []*os.File{its}
	fail := func(err error) (*Hold, error) {
		hc.close()
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cmd.Process = nil
		return fail(err)
	}
	its.Close()
	pid := cmd.Process.Pid
	b := make([]byte, 1)
	if _, err := io.ReadFull(mine, b); err != nil {
		return fail(fmt.Errorf("starting %s: %w", cmd.Args[0], err))
	}
	if err := hc.send(msg{kind: mSeize, pid: int32(pid)}); err != nil {
		return fail(fmt.Errorf("seizing %s: %w", cmd.Args[0], err))
	}
	if m, err := hc.recv(); err != nil || m.kind != mSeized {
		return fail(fmt.Errorf("seizing %s: the holder said %v, %v", cmd.Args[0], m, err))
	} else if m.pid != 0 {
		return fail(fmt.Errorf("seizing %s: %w", cmd.Args[0], syscall.Errno(m.pid)))
	}
	if _, err := mine.Write([]byte{2}); err != nil {
		return fail(fmt.Errorf("starting %s: %w", cmd.Args[0], err))
	}
	if m, err := hc.recv(); err != nil || m.kind != mStarted {
		return fail(fmt.Errorf("process %d ended before it ran %s", pid, cmd.Args[0]))
	}
	h := newHold()
	h.Pid, h.conn = pid, hc
	go h.serve(letGo)
	go h.beats()
	return h, nil
}

// Unheld is the Hold of process pid, already running (-p), which trace
// does not ptrace: a tracer that is stopped, or starved, must not stop
// the program at its next signal. It is never held at its exit, which
// its pidfd tells, and its children are not followed.
func Unheld(pid int) *Hold {
	h := newHold()
	h.Pid = pid
	return h
}

func newHold() *Hold {
	return &Hold{Exiting: make(chan struct{}), Done: make(chan struct{}), Children: make(chan *Child), ignore: make(chan struct{})}
}

// Resume lets a process that Start started run.
func (h *Hold) Resume() { h.resumeOnce.Do(func() { h.tellHolder(msg{kind: mResume}) }) }

// Drained lets a process stopped at its exit go on.
func (h *Hold) Drained() { h.drainOnce.Do(func() { h.tellHolder(msg{kind: mDrained}) }) }

// Ignore tells Hold that the tracer takes no more Children: they go on
// untraced by it.
func (h *Hold) Ignore() {
	h.ignoreOnce.Do(func() {
		close(h.ignore)
		h.tellHolder(msg{kind: mIgnore})
	})
}

// Lease tells the holder where the lease of process pid's ring is (ctl
// plus UntilAt, in the process), to run it out should the tracer die: a
// job-stopped trace's leases last a day.
func (h *Hold) Lease(pid int, ctl uint64) {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, ctl+ringlayout.UntilAt)
	h.tellHolder(msg{kind: mLease, pid: int32(pid), text: string(b)})
}

// Beat tells the holder that the tracer goes on: a reader calls it as
// it reads, at least every second. A tracer that stops beating (it is
// stopped, starved, or blocked on its output) for two seconds no longer
// holds the program where it waits for it.
func (h *Hold) Beat() { h.beat.Store(time.Now().UnixNano()) }

// tellHolder sends m to the holder, if any.
func (h *Hold) tellHolder(m msg) {
	if h.conn != nil {
		h.conn.send(m)
	}
}

// beats tells the holder, four times a second, that the tracer beats:
// from Start until its first Beat, and then while it beats.
func (h *Hold) beats() {
	t := time.NewTicker(holdBeat)
	defer t.Stop()
	for range t.C {
		last := h.beat.Load()
		if last != 0 && time.Since(time.Unix(0, last)) > time.Second {
			continue
		}
		if h.conn.send(msg{kind: mAlive}) != nil {
			return
		}
	}
}

// serve takes the holder's news, until it ends.
func (h *Hold) serve(letGo func(pid int, path string)) {
	defer h.conn.close()
	done := sync.OnceFunc(func() { close(h.Done) })
	defer done()
	for {
		m, err := h.conn.recv()
		if err != nil {
			return
		}
		switch m.kind {
		case mExiting:
			close(h.Exiting)
		case mDone:
			done()
		case mChildExec, mChildExit:
			h.tell(int(m.pid), m.kind == mChildExec)
			h.tellHolder(msg{kind: mGo, pid: m.pid})
		case mLetGo:
			letGo(int(m.pid), m.text)
		}
	}
}

// tell hands the tracer a child stopped at pid and waits until it goes
// on, or the tracer ignores children.
func (h *Hold) tell(pid int, exec bool) {
	c := &Child{Pid: pid, Exec: exec, on: make(chan struct{})}
	select {
	case h.Children <- c:
	case <-h.ignore:
		return
	}
	select {
	case <-c.on:
	case <-h.ignore:
	}
}

// stopSignal reports whether sig stops a process by default: the
// signals of job control.
func stopSignal(sig int) bool {
	switch syscall.Signal(sig) {
	case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return true
	}
	return false
}

// groupExiting reports whether thread tid, of process pid, stopped at
// its exit because the process exits. exit_group(2) tells every other
// thread to die (SIGKILL) before its caller exits: a thread that dies so
// has PF_SIGNALED in its flags, and at its caller's stop every other
// thread is dying (or tid is the last). A thread that exits alone is
// not signaled and leaves the others be.
func groupExiting(pid, tid int) bool {
	if flags, ok := taskFlags(pid, tid); ok && flags&pfSignaled != 0 {
		return true
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	mine := false
	for _, t := range tasks {
		id, _ := strconv.Atoi(t.Name())
		if id == tid {
			mine = true
		} else if !dying(pid, id) {
			return false
		}
	}
	return mine
}

// dying reports whether thread tid of process pid has been told to die
// (a SIGKILL pending) or is exiting (PF_EXITING in its flags, kept by
// a zombie), or is gone.
func dying(pid, tid int) bool {
	flags, ok := taskFlags(pid, tid)
	if !ok || flags&pfExiting != 0 {
		return true
	}
	pending, ok := StatusField(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid), "SigPnd")
	if !ok {
		return true
	}
	mask, _ := strconv.ParseUint(pending, 16, 64)
	return mask&(1<<(unix.SIGKILL-1)) != 0
}

// taskFlags reads the kernel's flags of thread tid of process pid; ok
// is false when it is gone.
func taskFlags(pid, tid int) (flags uint64, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, false
	}
	// Past the command's name, which may hold anything: state, ppid,
	// pgrp, session, tty, tpgid, flags.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 7 {
		return 0, true
	}
	flags, _ = strconv.ParseUint(fields[6], 10, 64)
	return flags, true
}

// The kernel's task flags: PF_EXITING is set as a task begins to exit,
// PF_SIGNALED when a signal killed it.
const (
	pfExiting  = 0x4
	pfSignaled = 0x400
)

// tgid is the id of the process thread tid is of, or tid where /proc
// does not say.
func tgid(tid int) int {
	v, _ := StatusField(fmt.Sprintf("/proc/%d/status", tid), "Tgid")
	if id, err := strconv.Atoi(v); err == nil {
		return id
	}
	return tid
}

// StatusField returns the value of key in a /proc status file (a
// process's or a thread's), without its spaces; ok is false when the
// file cannot be read or has no such line.
func StatusField(file, key string) (value string, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", false
	}
	for line := range strings.Lines(string(b)) {
		if v, found := strings.CutPrefix(line, key+":"); found {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// cldTrapped is siginfo's code for a ptrace stop.
const cldTrapped = 4

// waitAny waits for a task this thread traces to stop or exit, without
// reaping it, and returns its id, the siginfo's code and status: of the
// children and tracees of this thread only (WNOTHREAD), as trace's
// other children, usdt-export, are not its business.
func waitAny() (tid, code, status int, err error) {
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_ALL, 0, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT|unix.WALL|unix.WNOTHREAD, nil)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, 0, 0, err
	}
	// The SIGCHLD fields follow signo, errno and code: pid, uid, status.
	raw := (*[7]int32)(unsafe.Pointer(&info))
	return int(raw[4]), int(info.Code), int(raw[6]), nil
}
