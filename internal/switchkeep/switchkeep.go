// Package switchkeep keeps a running program's switches (textpatch)
// from outliving the tracer that wrote them: before a tracer switches a
// process's functions, it starts a keeper, a process of its own (this
// executable again, in a session of its own), and tells it the
// switches. A tracer that ends as it should switches the functions back
// and tells its keeper, which exits; one that dies (SIGKILL, a crash)
// closes its end of the pipe with the kernel's help, and the keeper
// switches the functions back at once, then exits. A keeper also exits
// when its process does.
package switchkeep

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/switchplan"
	"github.com/go-usdt/usdt/internal/textpatch"
	"github.com/go-usdt/usdt/internal/values"
)

// keeperEnv, set in its environment, makes this program a keeper; its
// value is the name that the keeper's messages start with.
const keeperEnv = "USDT_SWITCH_KEEPER"

func init() {
	if name, ok := os.LookupEnv(keeperEnv); ok {
		os.Exit(keep(name))
	}
}

// done is the byte a tracer writes once it switched back.
const done = 'd'

// An order is what a keeper is told: the process, its switches, and the
// tracer's process id.
type order struct {
	Pid     int
	Patches []textpatch.Patch
	Tracer  int
}

// A Keeper is the keeper of one process's switches.
type Keeper struct {
	w      *os.File
	exited chan struct{}
}

// Start starts the keeper of the switches patches of process pid, which
// the caller is about to write; name starts the keeper's messages on
// stderr ("usdt-toolexec trace").
func Start(name string, pid int, patches []textpatch.Patch) (*Keeper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), keeperEnv+"="+name)
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = os.Stderr
	// Its own session: the terminal's Ctrl-C and hang-up are the
	// tracer's, which switches back by itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the process that switches back should the tracer die: %w", err)
	}
	k := &Keeper{w: w, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(k.exited)
	}()
	// The pipe holds the order for the keeper should the tracer die
	// right after writing it. The tracer waits while the keeper reads
	// it: in gob, Caddy's 36,908 switches are 6.3 MB, read in 74 ms,
	// where JSON's 11.2 MB took 230-260 ms.
	if err := gob.NewEncoder(w).Encode(order{Pid: pid, Patches: patches, Tracer: os.Getpid()}); err != nil {
		w.Close()
		cmd.Process.Kill()
		return nil, fmt.Errorf("telling the process that switches back should the tracer die: %w", err)
	}
	return k, nil
}

// Done tells the keeper that the switches were taken back, or need not
// be (the process exited), and lets it exit.
func (k *Keeper) Done() {
	if k == nil {
		return
	}
	k.w.Write([]byte{done})
	k.w.Close()
	<-k.exited
}

// Leave leaves the switches to the keeper: the caller cannot switch
// them back, as a tracer holds the process (trace's holder, which lets
// it go when trace ends). The keeper switches them back once it can, or
// exits with the process.
func (k *Keeper) Leave() {
	if k != nil {
		k.w.Close()
	}
}

// holdersLetGo is how long a keeper tries to switch back a process that
// another tracer holds: trace's holder lets go of its processes when
// trace ends, within 2 s (ring.Hold).
const holdersLetGo = 5 * time.Second

// keep is a keeper's life: it reads its order, waits for the tracer's
// end or the process's, and switches back where the tracer died first.
func keep(name string) int {
	os.Unsetenv(keeperEnv)
	say := func(format string, args ...any) {
		fmt.Fprintln(os.Stderr, name+":", values.EscapeLines(fmt.Sprintf(format, args...)))
	}
	// The tracer, this keeper's parent while it lives: its end is
	// awaited before the switches are taken back (tracerEnded).
	tracer, tracerErr := unix.PidfdOpen(os.Getppid(), 0)
	// A bufio.Reader is an io.ByteReader, which gob reads no further
	// than the order from: what follows, done, stays in it.
	pipe := bufio.NewReader(os.NewFile(3, "tracer"))
	var o order
	if err := gob.NewDecoder(pipe).Decode(&o); err != nil {
		// The tracer died before it finished the order, and so
		// before it switched anything.
		return 0
	}
	tracerEnded := closed
	if tracerErr == nil && os.Getppid() == o.Tracer {
		tracerEnded = exited(tracer)
	} else if tracerErr == nil {
		unix.Close(tracer)
	}
	gone, err := Exited(o.Pid)
	if err != nil {
		return 0 // gone already
	}
	// A process that runs another executable since has none of the
	// switches' code.
	exe := fmt.Sprintf("/proc/%d/exe", o.Pid)
	was, err := os.Stat(exe)
	if err != nil {
		return 0
	}
	same := func() bool {
		now, err := os.Stat(exe)
		return err == nil && os.SameFile(was, now)
	}
	told := make(chan bool, 1)
	go func() {
		b, err := pipe.ReadByte()
		told <- err == nil && b == done
	}()
	select {
	case <-gone:
		return 0
	case ok := <-told:
		if ok {
			return 0
		}
	}
	// The pipe ends as the tracer's files close, one after another,
	// as it exits: the locks by which it holds its switches
	// (internal/switchhold) may not have gone yet, and its switches
	// would then seem another tracer's, and stay (1 run in 10 of
	// TestTraceSwitches' killed tracers left main.fib switched). Its
	// files are all closed once it has exited: the holder of a
	// command that trace leaves its switches to lets it go then too.
	select {
	case <-gone:
		return 0
	case <-tracerEnded:
	}
	if !same() {
		return 0
	}
	back, err := switchplan.Restore(o.Pid, o.Patches, nil, say)
	for start := time.Now(); errors.Is(err, unix.EPERM) && time.Since(start) < holdersLetGo; {
		select {
		case <-gone:
			return 0
		case <-time.After(50 * time.Millisecond):
		}
		back, err = switchplan.Restore(o.Pid, o.Patches, nil, say)
	}
	if err != nil {
		say("the tracer of process %d ended without switching its functions back, nor could this: %v", o.Pid, err)
		return 1
	}
	say("the tracer of process %d ended without switching its functions back: %d of %d run their own code again", o.Pid, back, len(o.Patches))
	return 0
}

// Exited returns a channel closed when process pid ends (a pidfd
// becomes readable then).
func Exited(pid int) (<-chan struct{}, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return exited(fd), nil
}

// closed is a channel closed already.
var closed = func() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// exited returns a channel closed when the process of the pidfd fd has
// ended: it has exited, and closed its files. It closes fd then.
func exited(fd int) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	return ch
}
