package ring

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Leases are the sessions of one trace whose leases it renews: its
// process's and those of the processes its command started.
type Leases struct {
	// mu is held for writing while the trace is stopped with its job.
	mu       sync.RWMutex
	sessions map[*Session]bool
}

// NewLeases returns an empty group of leases.
func NewLeases() *Leases { return &Leases{sessions: map[*Session]bool{}} }

// renew renews the session's lease every quarter of it, apart from the
// reading: a burst of events that takes the reader longer than the lease
// to print must not turn the probes off. lapsed is closed when a renewal
// fails; stop ends the renewals, and returns that failure. The session
// is one of the group's meanwhile.
func (l *Leases) renew(s *Session) (lapsed <-chan struct{}, stop func() error) {
	l.mu.Lock()
	l.sessions[s] = true
	l.mu.Unlock()
	failed, end := Renewing(func() error {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return s.Renew()
	})
	return failed, sync.OnceValue(func() error {
		err := end()
		l.mu.Lock()
		delete(l.sessions, s)
		l.mu.Unlock()
		return err
	})
}

// jobLease is how long a lease lasts while the trace is stopped with the
// command's job (Ctrl-Z).
const jobLease = 24 * time.Hour

// StopWithJob has the trace stop as it would by default when it takes
// SIGTSTP (Ctrl-Z), SIGTTIN or SIGTTOU (a background job's read or write
// of the terminal), which go to the whole process group, the command's
// processes too: those stop as well, and so does whoever reads their
// rings. The leases last jobLease meanwhile: the job goes on when it
// takes a SIGCONT (fg, bg), the program maybe before the trace renews
// them, and a lease run out would turn its probes off. stop ends it.
func (l *Leases) StopWithJob() (stop func()) {
	c := make(chan os.Signal, 1)
	jobSignals := []os.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}
	signal.Notify(c, jobSignals...)
	go func() {
		for sig := range c {
			l.mu.Lock()
			for s := range l.sessions {
				s.Extend(jobLease)
			}
			// The job's signal reached the program too, and its group
			// stop waits on this trace, whose hold passes the signal on
			// meanwhile: stopped first, the trace would leave the
			// program's other threads running.
			deadline := time.Now().Add(time.Second)
			for s := range l.sessions {
				for !threadsStopped(s.Pid()) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			stopSelf(sig.(syscall.Signal))
			for s := range l.sessions {
				s.Renew()
			}
			l.mu.Unlock()
		}
	}()
	return func() {
		signal.Stop(c)
		close(c)
	}
}

// threadsStopped reports whether every thread of process pid is stopped
// (T, or t under ptrace) or gone.
func threadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	for _, task := range tasks {
		state, ok := StatusField(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()), "State")
		if ok && state != "" && state[0] != 'T' && state[0] != 't' && state[0] != 'Z' && state[0] != 'X' {
			return false
		}
	}
	return true
}

// stopSelf stops the tracer, with the default action of sig, until a
// SIGCONT. signal.Reset would leave the runtime's handler, which ignores
// sig: the default goes in for the one signal, and the handler back
// after it.
func stopSelf(sig syscall.Signal) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The kernel's struct sigaction, whole: handler, flags, restorer,
	// mask. All zero is SIG_DFL.
	var dfl, old [4]uint64
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
		return
	}
	// To this thread: it stops before it returns.
	unix.Tgkill(os.Getpid(), unix.Gettid(), sig)
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
}
