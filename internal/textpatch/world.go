package textpatch

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/procstat"
)

// A world is a process whose threads are all stopped by this tracer:
// seized (PTRACE_SEIZE) and interrupted (PTRACE_INTERRUPT). Its methods
// must run on the OS thread that stopped it.
type world struct {
	pid     int
	threads []thread
}

type thread struct {
	tid int
	pc  uint64
	// sig is a signal the thread stopped to take, which it is given
	// back when it goes on.
	sig int
}

// stop stops every thread of process pid, those it starts meanwhile
// included, each within wait. On an error every thread seized goes on as
// it was: one that is seized but has not stopped yet is waited for up to
// settle more, for only a stopped thread can be let go. One that does
// not stop even then stays seized until this process ends.
func stop(pid int, wait time.Duration) (*world, error) {
	w := &world{pid: pid}
	seized := map[int]bool{}
	var pending []int // seized and interrupted, not yet seen stopped
	fail := func(err error) (*world, error) {
		for _, tid := range pending {
			if t, alive, _ := awaitStop(tid, settle); alive {
				w.threads = append(w.threads, t)
			}
		}
		w.resume()
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	for {
		tids, err := Threads(pid)
		if err != nil {
			return fail(err)
		}
		for _, tid := range tids {
			if seized[tid] {
				continue
			}
			seized[tid] = true
			switch err := ptrace(unix.PTRACE_SEIZE, tid, 0, 0); {
			case errors.Is(err, unix.ESRCH):
				continue // it exited
			case errors.Is(err, unix.EPERM):
				return fail(fmt.Errorf("seize thread %d: %w (another tracer, such as a debugger or strace, may hold it)", tid, err))
			case err != nil:
				return fail(fmt.Errorf("seize thread %d: %w", tid, err))
			}
			pending = append(pending, tid)
			if err := ptrace(unix.PTRACE_INTERRUPT, tid, 0, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fail(fmt.Errorf("interrupt thread %d: %w", tid, err))
			}
		}
		if len(pending) == 0 {
			// Every thread listed is stopped, and a stopped thread
			// starts none: the list is whole.
			return w, nil
		}
		for len(pending) > 0 {
			t, alive, err := awaitStop(pending[0], wait)
			if err != nil {
				return fail(err)
			}
			pending = pending[1:]
			if alive {
				w.threads = append(w.threads, t)
			}
		}
	}
}

// settle is how long stop waits, after an error, for a thread it seized
// to stop so that it can let it go.
const settle = 10 * time.Second

// Threads lists the threads of process pid.
func Threads(pid int) ([]int, error) {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// awaitStop waits up to wait for thread tid, seized and interrupted, to
// stop, and reads where. alive is false for a thread that exited.
func awaitStop(tid int, wait time.Duration) (t thread, alive bool, err error) {
	deadline := time.Now().Add(wait)
	pause := 10 * time.Microsecond
	for {
		var ws unix.WaitStatus
		got, err := wait4(tid, &ws, unix.WALL)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			return thread{}, false, nil // gone, reaped by its process
		case err != nil:
			return thread{}, false, fmt.Errorf("wait for thread %d: %w", tid, err)
		}
		if got == tid {
			if ws.Exited() || ws.Signaled() {
				return thread{}, false, nil
			}
			if ws.Stopped() {
				t := thread{tid: tid}
				// A stop with no event is a signal's delivery: the
				// signal is the thread's to take when it goes on. A
				// PTRACE_EVENT_STOP is the interrupt, or a group stop,
				// which the thread keeps after the detach.
				if int(ws)>>16 == 0 {
					t.sig = int(ws.StopSignal())
				}
				pc, err := threadPC(tid)
				if errors.Is(err, unix.ESRCH) {
					return thread{}, false, nil
				}
				if err != nil {
					return thread{}, false, fmt.Errorf("registers of thread %d: %w", tid, err)
				}
				t.pc = pc
				return t, true, nil
			}
		}
		if time.Now().After(deadline) {
			return thread{}, false, fmt.Errorf("thread %d did not stop within %v (%s)", tid, wait, threadState(tid))
		}
		nap(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// nap sleeps d in the kernel, on this OS thread, which a stop's tracer
// holds locked: time.Sleep parks the goroutine, and the thread then
// waits for the scheduler to wake it, 0.68 ms for a sleep of 20 µs
// measured here on 2 busy vCPUs, against 0.12 ms for nanosleep. Each
// thread that has not stopped yet when it is awaited costs a stop one
// such sleep at least.
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for errors.Is(unix.Nanosleep(&ts, &ts), unix.EINTR) {
	}
}

// threadState is the state /proc gives thread tid, for an error.
func threadState(tid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return "gone"
	}
	if st, ok := procstat.State(b); ok {
		return "state " + st
	}
	return "state unknown"
}

// threadPC reads a stopped thread's program counter (PTRACE_GETREGSET,
// NT_PRSTATUS, which arm64 has and PTRACE_GETREGS is not).
func threadPC(tid int) (uint64, error) {
	var regs unix.PtraceRegs
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&regs))}
	iov.SetLen(int(unsafe.Sizeof(regs)))
	if err := ptrace(unix.PTRACE_GETREGSET, tid, uintptr(elfNTPRStatus), uintptr(unsafe.Pointer(&iov))); err != nil {
		return 0, err
	}
	return regs.PC(), nil
}

const elfNTPRStatus = 1 // NT_PRSTATUS

// resume lets every thread go on, with the signal it stopped to take.
func (w *world) resume() {
	for _, t := range w.threads {
		ptrace(unix.PTRACE_DETACH, t.tid, 0, uintptr(t.sig))
	}
	w.threads = nil
}

// urgency runs each stop of the program at real-time priority
// (SCHED_FIFO) on the OS thread that stops it, where this process may
// (CAP_SYS_NICE, or an RLIMIT_RTPRIO), and between the stops leaves the
// thread as it was, so that the program runs. A thread that a stop lets
// go, woken on this thread's CPU, preempted this one before it had let
// the others go: 13 and 22 ms of the longest stops of Caddy under load
// were that (BENCHMARKS.md, "Switching Caddy at run time"). A process
// that may not, a thread already of another policy, or one under a
// limit of real-time CPU time, stops the program as it is.
type urgency struct {
	old    *unix.SchedAttr
	denied bool
	raised bool
}

func (u *urgency) raise() {
	if u.denied {
		return
	}
	if u.old == nil {
		// A limit on real-time CPU time (RLIMIT_RTTIME) would signal
		// this process past it: a tracer under one stops as it is.
		var lim unix.Rlimit
		old, err := unix.SchedGetAttr(0, 0)
		if err != nil || old.Policy != unix.SCHED_NORMAL || unix.Getrlimit(unix.RLIMIT_RTTIME, &lim) != nil || lim.Cur != unix.RLIM_INFINITY {
			u.denied = true
			return
		}
		u.old = old
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		u.denied = true
		return
	}
	u.raised = true
}

func (u *urgency) lower() {
	if !u.raised {
		return
	}
	old := *u.old
	old.Size = unix.SizeofSchedAttr
	unix.SchedSetAttr(0, &old, 0)
	u.raised = false
}
