package ring

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// A traced process's life in the ring is one state machine, which a
// Tracee owns. Attach takes it from nothing to Running, Detach from
// Running to Stopped, Close ends it:
//
//	Opened    Open took the ring: this tracer's token is in OwnerAt, the
//	          ring Preparing, nothing on. Keep renews the lease.
//	Prepared  The program knows what to write (Count or Plan).
//	          Inside Enable: "listed" (the list written, nothing on yet)
//	          and "raised" (the semaphores up).
//	Enabled   The probes are on, the ring Recording.
//	Running   A command started stopped goes on (Target.Resume), and
//	          the lease is renewed on a goroutine of its own until
//	          Detach or EndRenewals.
//	          Inside Detach's Stop: "undoing" (the semaphores going down)
//	          and "stopping" (down, the ring not yet off).
//	Stopped   The probes and the ring are off; the buffers still hold
//	          what the tracer takes last.
//	Closed    The process's memory is let go.
//
// Who undoes what, should the tracer die or stall at any step: before
// Enabled nothing is on, and the lease, no longer renewed, runs out
// within Lease; the next tracer's Open then takes the ring over. From
// "listed" to Stopped, every semaphore the session raised is in the
// ring's list, which the program's writer takes down by itself at its
// first fire after the lease ran out (the holder of a command runs it
// out at once, Hold.Lease), and which the next tracer's Open takes down
// where no probe fires (takeOver). Each change is one that both sides may
// make, or that one side alone claims (see semaphores.go): nothing is
// taken down twice, nothing is left on. A process that exits or runs
// another executable takes its ring with it: there is nothing to undo.

// State is a step of a Tracee's life.
type State int

// The states of a Tracee, in the order of its life.
const (
	Unopened State = iota
	Opened
	Prepared
	Enabled
	Running
	Stopped
	Closed
)

var stateNames = [...]string{"unopened", "opened", "prepared", "enabled", "running", "stopped", "closed"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state " + strconv.Itoa(int(s))
}

// Step is a moment of a session's life where PauseEnv stops the tracer:
// a state it enters, or a step inside Enable or Stop.
type Step struct {
	Name string
	// Detaching says that the step comes after the tracer was asked to
	// end (an interrupt), in Detach.
	Detaching bool
}

// Steps are the moments of a session's life that PauseEnv can name, in
// order: a test that kills the tracer at each of them covers every state.
var Steps = []Step{
	{Name: Opened.String()},
	{Name: Prepared.String()},
	{Name: "listed"},
	{Name: "raised"},
	{Name: Enabled.String()},
	{Name: Running.String()},
	{Name: "undoing", Detaching: true},
	{Name: "stopping", Detaching: true},
	{Name: Stopped.String(), Detaching: true},
}

// Target is the process a Tracee attaches to. Its addresses are in the
// process's memory, the executable's load bias added.
type Target struct {
	Pid int
	// Ctl is where the ring is; Where, its Where words (Address).
	Ctl, Where uint64
	// ProcsAt is where the process has runtime.gomaxprocs, 0 where the
	// executable does not say.
	ProcsAt uint64
	// Slots and Size are the ring's buffers: how many, and the bytes of
	// each (SlotsFor).
	Slots, Size int
	// Sems are the semaphores of the probes to turn on.
	Sems []Semaphore
	// Runs reports whether the process runs the executable that the
	// tracer read the addresses from; nil where it need not be checked.
	Runs func() bool
	// Prepare tells the program what to write before the probes go on:
	// the counts of Count, or the value reads of Plan.
	Prepare func(*Session) error
	// Resume lets a command that was started stopped go on; nil for a
	// process that runs.
	Resume func() error
	// Leases is the group whose renewals a job stop holds
	// (Leases.StopWithJob); nil for one of the Tracee's own.
	Leases *Leases
	// Hold, if any, holds the process: told where its lease is, it runs
	// the lease out should the tracer die (Hold.Lease).
	Hold *Hold
}

// Tracee is one process traced through its ring, and where its session
// is in its life.
type Tracee struct {
	*Session
	procsAt uint64
	// procsTold says that FollowProcs reported a ring without room for
	// every P.
	procsTold bool
	lapsed    <-chan struct{}
	renewals  func() error
}

// Attach opens the ring of the target, prepares it and turns its
// probes on, then lets a command that waits go on, and renews the lease
// from then on. Whatever step fails, what the steps before it turned on
// is off again when it returns.
func Attach(t Target) (*Tracee, error) {
	tr := &Tracee{procsAt: t.ProcsAt}
	s, err := Open(t.Pid, t.Ctl, t.Where, t.Slots, t.Size)
	if err != nil {
		return nil, err
	}
	tr.Session = s
	if t.Hold != nil {
		t.Hold.Lease(t.Pid, t.Ctl)
	}
	tr.enter(Opened)
	// The memory Open took is the process's as it ran the executable the
	// tracer read, or it has run another since.
	if t.Runs != nil && !t.Runs() {
		s.Close()
		return nil, fmt.Errorf("process %d no longer runs the executable the tracer read: it ran another since", t.Pid)
	}
	keep := s.Keep()
	fail := func(err error, stop bool) (*Tracee, error) {
		keep()
		if stop {
			s.Stop()
		}
		s.Close()
		return nil, err
	}
	if t.Prepare != nil {
		if err := t.Prepare(s); err != nil {
			return fail(err, true)
		}
	}
	tr.enter(Prepared)
	// The semaphores are written by the process's id: an exec while the
	// plans were made, or while they are written, is seen in the memory
	// the session holds, which it takes away.
	if err := s.Same(); err != nil {
		return fail(err, false)
	}
	if err := s.Enable(t.Sems); err != nil {
		return fail(err, true)
	}
	if err := s.Same(); err != nil {
		return fail(fmt.Errorf("%w: while the tracer turned its probes on, which may be left on in the executable it runs now", err), false)
	}
	tr.enter(Enabled)
	if t.Resume != nil {
		if err := t.Resume(); err != nil {
			return fail(err, true)
		}
	}
	// The renewals take over from Keep's with no gap between them.
	leases := t.Leases
	if leases == nil {
		leases = NewLeases()
	}
	tr.lapsed, tr.renewals = leases.renew(s)
	keep()
	tr.enter(Running)
	return tr, nil
}

// enter moves the Tracee to state, where PauseEnv may stop the tracer.
func (t *Tracee) enter(state State) { pause(state.String()) }

// Lapsed is closed when a renewal of the lease failed: the program
// turned its probes off, since this tracer was stopped or starved past
// its lease, or its process is gone. EndRenewals says why.
func (t *Tracee) Lapsed() <-chan struct{} { return t.lapsed }

// EndRenewals ends the lease's renewals, and returns the failure that
// ended them first, if one did. The probes stay on until the lease runs
// out, for a process that is exiting and whose last records the tracer
// still takes.
func (t *Tracee) EndRenewals() error {
	if t.renewals == nil {
		return nil
	}
	return t.renewals()
}

// Detach turns the probes and the ring off, after the renewals: one
// after Stop would find the probes off and fail. The buffers' rest is
// then the tracer's to Take.
func (t *Tracee) Detach() error {
	t.EndRenewals()
	err := t.Stop()
	t.enter(Stopped)
	return err
}

// Close lets the process's memory go; Detach first, unless the process
// is gone.
func (t *Tracee) Close() error {
	t.EndRenewals()
	return t.Session.Close()
}

// FollowProcs gives the Ps that the program added since the last call
// (it raised GOMAXPROCS) buffers of their own. It returns, the first
// time the ring has no room for every P, how many Ps the program has and
// how many have a buffer; else 0, 0.
func (t *Tracee) FollowProcs() (procs, got int) {
	if t.procsAt == 0 {
		return 0, 0
	}
	v, err := t.Uint32(t.procsAt)
	n := min(int(int32(v)), ringlayout.MaxSlots)
	if err != nil || n <= t.Slots() {
		return 0, 0
	}
	got, err = t.Grow(n)
	if err != nil || got >= n || t.procsTold {
		return 0, 0
	}
	t.procsTold = true
	return n, got
}

// SlotsFor returns how many buffers of size bytes (0 for the default
// of procs) a ring has for a program of procs Ps: one each, as far as
// the ring has room, and at least 8, where GOMAXPROCS goes up later.
func SlotsFor(procs, size int) (slots, bytes int) {
	if size == 0 {
		size = SizeFor(procs)
	}
	return min(ringlayout.MaxSlots, max(procs, 8), ringlayout.DataMax/size), size
}

// Procs returns the GOMAXPROCS of process pid: its runtime.gomaxprocs,
// at procsAt in its memory (ProcsAddr plus the load bias; 0 where the
// executable has no symbols); before its runtime has set it (a command
// stopped at its exec), or without procsAt, its environment's GOMAXPROCS,
// or this machine's CPUs.
func Procs(pid int, procsAt uint64) int {
	if n := runningProcs(pid, procsAt); n > 0 {
		return n
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for kv := range strings.SplitSeq(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					return min(n, ringlayout.MaxSlots)
				}
			}
		}
	}
	return runtime.NumCPU()
}

// runningProcs reads runtime.gomaxprocs of process pid at at, 0 where it
// cannot.
func runningProcs(pid int, at uint64) int {
	if at == 0 {
		return 0
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return 0
	}
	defer mem.Close()
	var b [4]byte
	if _, err := mem.ReadAt(b[:], int64(at)); err != nil {
		return 0
	}
	return max(0, min(int(int32(binary.LittleEndian.Uint32(b[:]))), ringlayout.MaxSlots))
}

// ProcsAddr is where the executable ef has runtime.gomaxprocs, at link
// time: 0 where it has no such symbol.
func ProcsAddr(ef *elf.File) uint64 {
	syms, _ := ef.Symbols()
	for _, sym := range syms {
		if sym.Name == "runtime.gomaxprocs" && sym.Size == 4 {
			return sym.Value
		}
	}
	return 0
}
