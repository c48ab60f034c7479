package ring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Hold keeps a traced process's memory until the tracer has read its
// buffers: a process's memory is gone the moment it exits, with the
// events its last fires wrote. The process is ptraced (by its parent, or
// by PTRACE_SEIZE, which needs the access that writing its memory
// needs); it stops when it exits (PTRACE_EVENT_EXIT), and Hold tells
// Exiting, and lets it go on once Drained. Its signals are passed on at
// once. A tracer that dies detaches by itself: the process goes on.
//
// A command that Start starts is followed into the processes it starts:
// every thread of it and of them is traced, so that each fork, and each
// exec, stops where the tracer sees it (Children).
//
// Every ptrace call comes from one locked thread: the kernel knows the
// tracer by thread.
type Hold struct {
	Pid int
	// Exiting is closed when the process stopped at its exit.
	Exiting chan struct{}
	// Done is closed when the process is no longer held: only then may
	// its parent wait for it, as a wait would take the ptrace stops.
	Done chan struct{}
	// Children has, for a command Start started, each process of its
	// that has just run an executable, and each such process (but the
	// command's) at its exit: stopped, until the tracer says Go.
	Children chan *Child
	drained  chan struct{}
	resume   chan struct{}
	started  chan error
	// ignore is closed when the tracer no longer takes Children.
	ignore     chan struct{}
	ignoreOnce sync.Once
	// stopped says the process waits in a ptrace stop to be let go on.
	stopped bool
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
const follow = unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACEEXEC

// Start starts cmd, stopped before its first instruction until Resume:
// the ring must be on before the program's first probe fires.
func Start(cmd *exec.Cmd) (*Hold, error) {
	h := newHold()
	h.stopped = true
	go h.run(func() (int, error) {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Ptrace = true
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		pid := cmd.Process.Pid
		// The exec's SIGTRAP stop.
		if code, status, err := waitStop(pid); err != nil || code != cldTrapped {
			cmd.Process.Kill()
			return 0, fmt.Errorf("starting %s stopped: %v (code %d, status %#x)", cmd.Path, err, code, status)
		}
		return pid, unix.PtraceSetOptions(pid, follow)
	})
	if err := <-h.started; err != nil {
		return nil, err
	}
	h.Pid = cmd.Process.Pid
	return h, nil
}

// Seize holds process pid, already running (not the processes it
// starts).
func Seize(pid int) (*Hold, error) {
	h := newHold()
	h.Pid = pid
	go h.run(func() (int, error) {
		// The options come with the seize: setting them later needs the
		// process stopped.
		if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, unix.PTRACE_O_TRACEEXIT, 0, 0); e != 0 {
			return 0, accessError(pid, e)
		}
		return pid, nil
	})
	if err := <-h.started; err != nil {
		return nil, err
	}
	close(h.resume)
	return h, nil
}

func newHold() *Hold {
	return &Hold{Exiting: make(chan struct{}), Done: make(chan struct{}), Children: make(chan *Child), drained: make(chan struct{}),
		resume: make(chan struct{}), started: make(chan error), ignore: make(chan struct{})}
}

// Resume lets a process that Start started run.
func (h *Hold) Resume() { close(h.resume) }

// Drained lets a process stopped at its exit go on.
func (h *Hold) Drained() {
	select {
	case <-h.drained:
	default:
		close(h.drained)
	}
}

// Ignore tells Hold that the tracer takes no more Children: they go on
// untraced by it.
func (h *Hold) Ignore() { h.ignoreOnce.Do(func() { close(h.ignore) }) }

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

func (h *Hold) run(attach func() (int, error)) {
	defer close(h.Done)
	runtime.LockOSThread()
	// The thread stays locked: it is the tracer, the kernel knows it by
	// thread. The processes the command started that still run when it
	// ends stay traced by it, until it exits with the goroutine (or,
	// should the runtime keep it, with trace): the kernel detaches them
	// then.
	pid, err := attach()
	h.started <- err
	if err != nil {
		return
	}
	<-h.resume
	// seen holds the tasks that have stopped here before: a task the
	// kernel attached at a fork or a clone stops first with a SIGSTOP
	// of the kernel's, which is not passed on. execed holds the
	// processes told to the tracer at an exec, to be told at their exit.
	seen, execed := map[int]bool{pid: true}, map[int]bool{}
	exiting := false
	if h.stopped {
		if err := unix.PtraceCont(pid, 0); err != nil {
			return
		}
	}
	for {
		tid, code, status, err := waitAny()
		if err != nil {
			return
		}
		if code != cldTrapped {
			if tid == pid {
				return
			}
			// A thread or a process of the command's ended: reaped
			// here, its tracer, so that its parent learns of it.
			var info unix.Siginfo
			unix.Waitid(unix.P_PID, tid, &info, unix.WEXITED|unix.WALL|unix.WNOTHREAD, nil)
			delete(seen, tid)
			delete(execed, tid)
			continue
		}
		sig := 0
		// A ptrace stop's status is its signal, and its event above.
		switch event := status >> 8; {
		case !seen[tid]:
			seen[tid] = true
			if status&0xff != int(unix.SIGSTOP) {
				sig = status & 0xff
			}
		case event == unix.PTRACE_EVENT_EXIT && (tid == pid || groupExiting(pid, tid)):
			// The process's exit: its leader's, or that of the thread
			// that called exit_group, which stops first. The leader,
			// killed by that call, may not stop at all.
			if !exiting {
				exiting = true
				close(h.Exiting)
				<-h.drained
			}
			if tid == pid {
				// Its other threads stop at their exits too: they
				// are continued, and reaped, as they come, until its
				// parent may reap it (a seized process's end is not
				// told here).
				unix.PtraceDetach(pid)
				continue
			}
		case event == unix.PTRACE_EVENT_EXIT:
			leader := tgid(tid)
			if execed[leader] && (tid == leader || groupExiting(leader, tid)) {
				delete(execed, leader)
				h.tell(leader, false)
			}
		case event == unix.PTRACE_EVENT_EXEC:
			// The thread that called exec is now the process's only
			// one, known by the process's id.
			execed[tid] = true
			h.tell(tid, true)
		case event == unix.PTRACE_EVENT_STOP:
			// A group stop of a seized process: it stays stopped
			// until a SIGCONT, as without a tracer.
			unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_LISTEN, uintptr(tid), 0, 0, 0, 0)
			continue
		case event == 0:
			// A signal: passed on as it came.
			sig = status & 0xff
		}
		if err := unix.PtraceCont(tid, sig); err != nil && tid == pid {
			return
		}
	}
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

// waitStop waits for the process to stop or exit, without reaping it
// (its parent's Wait does), and returns the siginfo's code and status.
func waitStop(pid int) (code, status int, err error) {
	_, code, status, err = wait(unix.P_PID, pid)
	return code, status, err
}

// waitAny is waitStop for any task this thread traces.
func waitAny() (tid, code, status int, err error) { return wait(unix.P_ALL, 0) }

// wait waits as waitStop does, for the children and tracees of this
// thread only (WNOTHREAD): trace's other children, usdt-export, are not
// its business.
func wait(idtype, id int) (tid, code, status int, err error) {
	var info unix.Siginfo
	for {
		err = unix.Waitid(idtype, id, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT|unix.WALL|unix.WNOTHREAD, nil)
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
