package ring

import (
	"fmt"
	"os/exec"
	"runtime"
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
// Every ptrace call comes from one locked thread: the kernel knows the
// tracer by thread.
type Hold struct {
	Pid int
	// Exiting is closed when the process stopped at its exit.
	Exiting chan struct{}
	// Done is closed when the process is no longer held: only then may
	// its parent wait for it, as a wait would take the ptrace stops.
	Done    chan struct{}
	drained chan struct{}
	resume  chan struct{}
	started chan error
	// stopped says the process waits in a ptrace stop to be let go on.
	stopped bool
}

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
		return pid, unix.PtraceSetOptions(pid, unix.PTRACE_O_TRACEEXIT)
	})
	if err := <-h.started; err != nil {
		return nil, err
	}
	h.Pid = cmd.Process.Pid
	return h, nil
}

// Seize holds process pid, already running.
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
	return &Hold{Exiting: make(chan struct{}), Done: make(chan struct{}), drained: make(chan struct{}), resume: make(chan struct{}), started: make(chan error)}
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

func (h *Hold) run(attach func() (int, error)) {
	defer close(h.Done)
	runtime.LockOSThread()
	// The thread stays locked, and so exits with the goroutine: it is
	// the tracer of a process that may still run.
	pid, err := attach()
	h.started <- err
	if err != nil {
		return
	}
	<-h.resume
	sig, stopped := 0, h.stopped
	for {
		// A seized process runs already; one Start started is stopped.
		if stopped {
			if err := unix.PtraceCont(pid, sig); err != nil {
				return
			}
		}
		stopped = true
		code, status, err := waitStop(pid)
		if err != nil || code != cldTrapped {
			return
		}
		sig = 0
		// A ptrace stop's status is its signal, and its event above.
		switch event := status >> 8; {
		case event == unix.PTRACE_EVENT_EXIT:
			close(h.Exiting)
			<-h.drained
			unix.PtraceDetach(pid)
			return
		case event == unix.PTRACE_EVENT_STOP:
			// A group stop of a seized process: it stays stopped
			// until a SIGCONT, as without a tracer.
			unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_LISTEN, uintptr(pid), 0, 0, 0, 0)
			code, _, err := waitStop(pid)
			if err != nil || code != cldTrapped {
				return
			}
		case event == 0:
			// A signal: passed on as it came.
			sig = status & 0xff
		}
	}
}

// cldTrapped is siginfo's code for a ptrace stop.
const cldTrapped = 4

// waitStop waits for the process to stop or exit, without reaping it
// (its parent's Wait does), and returns the siginfo's code and status.
func waitStop(pid int) (code, status int, err error) {
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT|unix.WALL, nil)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, 0, err
	}
	// The SIGCHLD fields follow signo, errno and code: pid, uid, status.
	raw := (*[7]int32)(unsafe.Pointer(&info))
	return int(info.Code), int(raw[6]), nil
}
