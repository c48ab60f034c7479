package trace

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/procstat"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/values"
)

// Transport is how the events of the probes reach the tracer.
type Transport string

const (
	// TransportAuto is the ring where the binary has one and it records
	// every selected probe, else BPF; and the ring for a user who may
	// not load BPF programs (not root) whatever it leaves out.
	TransportAuto Transport = "auto"
	// TransportBPF attaches a BPF program to every site: every fire is
	// a trap.
	TransportBPF Transport = "bpf"
	// TransportRing has the probes write their events into a buffer in
	// the program's memory (package ring): no trap, no root.
	TransportRing Transport = "ring"
)

// chooseTransport returns where the binary has the ring, whether the
// trace goes through it, and why, for -v.
func chooseTransport(opt Options, sites []site) (ctl uint64, use bool, why string, err error) {
	automatic := 0
	plain := plainOfCopies(sites)
	for i := range sites {
		if ringRecords(&sites[i]) || plain(&sites[i]) {
			automatic++
		}
	}
	f, err := elf.Open(opt.Binary)
	if err != nil {
		return 0, false, "", err
	}
	defer f.Close()
	ctl, _, has := ring.Address(f)
	noRing := "the binary has no in-process ring"
	if !has && ring.Stale(f) {
		noRing = "the binary's in-process ring is an older usdt-toolexec's, whose layout this trace does not write"
	}
	root := os.Geteuid() == 0
	switch {
	case opt.Transport == TransportBPF:
		return 0, false, "as -transport bpf asks", nil
	case opt.Transport == TransportRing && !has:
		return 0, false, "", fmt.Errorf("%s: %s: build it with this usdt-toolexec (amd64 or arm64), or trace it with -transport bpf", opt.Binary, noRing)
	case opt.Transport == TransportRing && automatic == 0:
		return 0, false, "", errors.New("-transport ring records the automatic probes of usdt-toolexec's rules that are code, and the usdtgen probes of packages it compiled, and no selected probe is one: trace the others (usdtgen's built with cgo and no usdt-toolexec, or with a bool past its 8th argument, and those of rules with sites: notes) with -transport bpf")
	case opt.Transport == TransportRing:
		return ctl, true, "as -transport ring asks", nil
	case !has:
		return 0, false, noRing, nil
	case automatic == 0:
		return 0, false, "the ring records no selected probe (a usdtgen probe of a package usdt-toolexec did not compile, or with a bool past its 8th argument, or one whose sites are notes)", nil
	case !root:
		return ctl, true, "BPF needs root, and the binary has an in-process ring", nil
	case automatic < len(sites):
		return 0, false, fmt.Sprintf("the ring does not record %d selected probes (usdtgen probes of packages usdt-toolexec did not compile, or with a bool past its 8th argument, or probes whose sites are notes)", len(sites)-automatic), nil
	case opt.Attach != "" && opt.Attach != AttachAuto:
		return 0, false, "-attach chooses how BPF attaches", nil
	}
	if opt.PID != 0 {
		// Where ptrace is denied (Yama's ptrace_scope 3) but BPF is
		// allowed, BPF; /proc/PID/mem asks what ptrace would.
		mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", opt.PID), os.O_RDWR, 0)
		if err != nil {
			return 0, false, fmt.Sprintf("the ring needs ptrace access to process %d, which is denied (%v)", opt.PID, err), nil
		}
		mem.Close()
		if bias, err := ring.Bias(opt.PID, f); err == nil {
			if on, _ := ring.InUse(opt.PID, ctl+bias); on {
				return 0, false, fmt.Sprintf("another trace records through the ring of process %d", opt.PID), nil
			}
		}
	}
	return ctl, true, "the binary has an in-process ring, which records every selected probe (-transport bpf traps into BPF instead)", nil
}

// ringRecords reports whether the ring records s: an automatic probe that
// is code, not a note on its function's own instructions, or a usdtgen
// probe whose package this usdt-toolexec compiled.
func ringRecords(s *site) bool { return s.fn != "" && s.table.Func == "" || s.providerRing }

// plainOfCopies returns whether a site of sites is the note, on a
// function's code as compiled, of a probe whose traced copy (sites:
// switch) has the probe's code too: the ring records the copy's, once
// a switch sends the calls there (see switch.go), and leaves the note
// to BPF and the other consumers.
func plainOfCopies(sites []site) func(*site) bool {
	type name struct{ provider, name string }
	copies := map[name]bool{}
	for i := range sites {
		if s := &sites[i]; s.fn != "" && s.table.Func == "" {
			copies[name{s.Provider, s.Name}] = true
		}
	}
	return func(s *site) bool { return s.table.Func != "" && copies[name{s.Provider, s.Name}] }
}

// runRing traces through the rings of the process and of those its
// command starts that run the same binary (ringTrace): each process's
// session is a ring.Tracee, which owns its life.
func runRing(opt Options, binary, selected []site, ctl uint64, pidfd int) error {
	t := newRingTrace(opt, binary, selected, ctl)
	f, hold, err := startRing(opt, pidfd)
	if err != nil {
		return err
	}
	t.f, t.hold = f, hold
	defer hold.Drained()
	// Before the hold is let go: a child stopped for the tracer goes on.
	defer hold.Ignore()
	defer f.Close()
	if f.cmd != nil {
		defer t.leases.StopWithJob()()
	}
	t.switches = planSwitches(opt, selected, false)
	s, err := t.attach(hold.Pid, f.resume, f.cmd != nil)
	if err != nil {
		return err
	}
	t.main = s
	defer s.Close()
	// Whatever ends the trace, a process that lives on runs its own
	// code again (end switches it back before its probes go off).
	defer s.sw.off()
	if opt.Verbose {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: attached %d probes of process %d: they record in its own memory\n", len(t.sites), s.pid)
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: transport ring: %s\n", opt.transportWhy)
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: the program times its calls by %s\n", s.Clock())
	}
	var finish func()
	if !opt.Stats {
		var flush func()
		finish, flush = t.startEvents()
		defer flush()
	}
	t.mainHandle = t.handle(s)
	defer t.endChildren()
	t.exit = watchExit(f.pidfd)
	defer t.exit.stop()
	sp := t.newStatPrinter()
	readErr, lapse, exiting, err := t.poll(sp)
	if err != nil {
		return err
	}
	return t.end(sp, finish, readErr, lapse, exiting)
}

// exitWatch tells when the process of a pidfd exits.
type exitWatch struct {
	// gone is closed when it has exited, at at.
	gone  chan struct{}
	at    time.Time
	pidfd int
	done  chan struct{}
	stop  func()
}

// watchExit watches the process of pidfd; with none (-1), gone never
// closes.
func watchExit(pidfd int) *exitWatch {
	w := &exitWatch{gone: make(chan struct{}), pidfd: pidfd, done: make(chan struct{})}
	w.stop = sync.OnceFunc(func() { close(w.done) })
	if pidfd < 0 {
		return w
	}
	go func() {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			select {
			case <-w.done:
				return
			default:
			}
			// Woken at the exit; now and then to see whether trace
			// ended first.
			if n, err := unix.Poll(fds, 100); err == nil && n > 0 {
				w.at = time.Now()
				close(w.gone)
				return
			}
		}
	}()
	return w
}

// exited reports whether the process has exited, and when, waiting for
// the watch to see it where the pidfd says it has. A process whose
// memory is gone (memoryGone: a read said ring.ErrExited) is exiting:
// the kernel frees a process's memory before its pidfd turns readable,
// when its last thread has gone, so exited waits up to a second for
// that; one that lives on ran another executable.
func (w *exitWatch) exited(memoryGone bool) (time.Time, bool) {
	select {
	case <-w.gone:
		return w.at, true
	default:
	}
	switch {
	case memoryGone:
		select {
		case <-w.gone:
			return w.at, true
		case <-time.After(time.Second):
			return time.Time{}, false
		}
	case w.pidfd < 0 || !readable(w.pidfd):
		return time.Time{}, false
	}
	<-w.gone
	return w.at, true
}

// countsPollEvery is how often a counting reader wakes: it has no
// records to take, only the losses of Ps without a slot to see.
const countsPollEvery = 250 * time.Millisecond

// idleEvery is how often a reader wakes while its program is idle, and
// idleAfter after how many polls in a row that found it so.
const (
	idleEvery = 100 * time.Millisecond
	idleAfter = 5
)

// idleWatch slows a reader's polls while its program is idle. A program
// whose threads did not run wrote nothing, and the wakes every 20 ms were
// most of what an idle trace cost: its reads of the rings' headers, and
// the Go runtime's own work at each wake (sysmon's, the scheduler's).
// The first poll after the program ran again, at most idleEvery later,
// finds it so, and the reader wakes at its usual pace again: a burst's
// first idleEvery must fit in the ring (by default 32 MiB a P up to 4
// Ps, less past them).
type idleWatch struct {
	cpu   time.Duration
	still int // polls in a row that found the program's CPU time unchanged
}

// every is when the reader should wake next: normal, or idleEvery once
// idleAfter polls in a row found the program's CPU time, cpu (cpuTime,
// read once a poll), unchanged; may says whether it may slow at all.
func (w *idleWatch) every(cpu, normal time.Duration, may bool) time.Duration {
	if cpu < 0 || !may || cpu != w.cpu {
		w.cpu, w.still = cpu, 0
		return normal
	}
	if w.still++; w.still < idleAfter {
		return normal
	}
	return idleEvery
}

// countReads are the reads of a process's counters while it runs: one
// for what a process that trace does not hold at its exit leaves
// (ringTrace.kept), one for the calls that sampling leaves out, each into
// buffers of its own, the buffer their sums with the children's go into,
// and the losses that -stats' last snapshot carried.
type countReads struct {
	kept, left countRead
	sum        []uint64
	lost       uint64
}

// countRead reads a process's counters into two buffers in turn, and
// skips a read where the process has not run since the last.
type countRead struct {
	// last is the last read; spare takes the next, so that last stays
	// whole where that fails. cpu is the process's CPU time just before
	// last was read, or -1.
	last, spare []uint64
	cpu         time.Duration
}

// cpuTime is process pid's CPU time (procstat.CPUTime), or -1 where it
// cannot be read. A reader reads it once a poll, before it reads the
// counters, for countRead and idleWatch.
func cpuTime(pid int) time.Duration {
	cpu, err := procstat.CPUTime(pid)
	if err != nil {
		return -1
	}
	return cpu
}

// read returns the counters of s's process, and whether they may have
// changed since the last read. An idle program counts nothing: where its
// CPU time, cpu (cpuTime, read before this), is what it was before the
// last read, no thread of it ran since, and read returns the last (an
// idle trace of every function of net/http took 1.9 % of a CPU, most of
// it reading every P's counters every 250 ms; 0.3 % since:
// scripts/bench-idle.sh). force reads anyway. The counters returned are
// read's until its next call but one.
func (r *countRead) read(s *ringSession, cpu time.Duration, force bool) (counts []uint64, changed bool, err error) {
	if r.last != nil && cpu >= 0 && cpu == r.cpu && !force {
		return r.last, false, nil
	}
	c, err := s.CountersInto(r.spare)
	if err != nil {
		return nil, false, err
	}
	r.last, r.spare, r.cpu = c, r.last, cpu
	return c, true, nil
}

// countsAtExits reports whether the counted sites hold no entry of a
// function that has an exit probe in the binary (whose trampoline,
// asmgen's now, then needs only the time): statSites counts such a
// function's calls at its exit, unless the patterns left its exit out.
func countsAtExits(binary, counted []site) bool {
	exits := map[string]bool{}
	for _, s := range binary {
		if s.exit {
			exits[s.fn] = true
		}
	}
	for _, s := range counted {
		if s.fn != "" && !s.exit && exits[s.fn] {
			return false
		}
	}
	return true
}

// addCounts adds the counters of one process's ring to those of
// others, in place, and returns them.
func addCounts(sum, counts []uint64) []uint64 {
	for i, n := range counts {
		sum[i] += n
	}
	return sum
}

// runsExe reports whether process pid runs the executable exe; alive is
// false where /proc shows it none (gone, or a zombie).
func runsExe(pid int, exe os.FileInfo) (runs, alive bool) {
	now, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && os.SameFile(now, exe), err == nil
}

// startRing starts the command, stopped before its first instruction
// until the ring is on, or holds the process of -p, so that the events of
// either's last fires are read before its memory goes (ring.Hold).
func startRing(opt Options, pidfd int) (*follower, *ring.Hold, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	f := &follower{ctx: ctx, stop: stop, done: make(chan struct{}), pidfd: pidfd}
	if len(opt.Command) == 0 {
		return f, ring.Unheld(opt.PID), nil
	}
	f.cmd = exec.Command(opt.Binary, opt.Command[1:]...)
	f.cmd.Args[0] = opt.Command[0]
	f.cmd.Stdin, f.cmd.Stdout, f.cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
	h, err := ring.Start(f.cmd, func(pid int, path string) {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d runs %s, which gains privileges when it runs: trace lets it go, untraced, with the processes it starts\n", pid, values.Escape(path))
	})
	if err != nil {
		stop()
		return nil, nil, err
	}
	f.resume = func() error {
		f.resume = nil
		h.Resume()
		go func() {
			<-h.Done
			f.waitErr = f.cmd.Wait()
			close(f.done)
		}()
		return nil
	}
	return f, h, nil
}
