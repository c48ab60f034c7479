package trace

import (
	"bufio"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
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
	for i := range sites {
		if ringRecords(&sites[i]) {
			automatic++
		}
	}
	f, err := elf.Open(opt.Binary)
	if err != nil {
		return 0, false, "", err
	}
	defer f.Close()
	ctl, has := ring.Address(f)
	root := os.Geteuid() == 0
	switch {
	case opt.Transport == TransportBPF:
		return 0, false, "as -transport bpf asks", nil
	case opt.Transport == TransportRing && !has:
		return 0, false, "", fmt.Errorf("%s has no in-process ring: build it with this usdt-toolexec (amd64 or arm64), or trace it with -transport bpf", opt.Binary)
	case opt.Transport == TransportRing && automatic == 0:
		return 0, false, "", errors.New("-transport ring records the automatic probes of usdt-toolexec's rules that are code, and the usdtgen probes of packages it compiled, and no selected probe is one: trace the others (usdtgen's built with cgo and no usdt-toolexec, or with a bool past its 8th argument, and those of rules with sites: notes) with -transport bpf")
	case opt.Transport == TransportRing:
		return ctl, true, "as -transport ring asks", nil
	case !has:
		return 0, false, "the binary has no in-process ring", nil
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
		if tracer := tracerOf(opt.PID); tracer != 0 {
			return 0, false, fmt.Sprintf("the ring ptraces process %d, which process %d already does", opt.PID, tracer), nil
		}
	}
	return ctl, true, "the binary has an in-process ring, which records every selected probe (-transport bpf traps into BPF instead)", nil
}

// tracerOf returns the process that ptraces process pid, 0 for none.
func tracerOf(pid int) int {
	v, _ := ring.StatusField(fmt.Sprintf("/proc/%d/status", pid), "TracerPid")
	n, _ := strconv.Atoi(v)
	return n
}

// ringRecords reports whether the ring records s: an automatic probe that
// is code, not a note on its function's own instructions, or a usdtgen
// probe whose package this usdt-toolexec compiled.
func ringRecords(s *site) bool { return s.fn != "" && s.table.Func == "" || s.providerRing }

// runRing traces through the ring of the process: it turns the selected
// probes on, reads their events every pollEvery while renew renews its lease,
// and at the end turns them off again.
func runRing(opt Options, binary, selected []site, ctl uint64, pidfd int) error {
	// By index, and copied only when some are left out: a site is 400
	// bytes, and Caddy has 120,000 of them.
	recorded, notes := 0, 0
	for i := range selected {
		switch {
		case ringRecords(&selected[i]):
			recorded++
		case selected[i].fn != "":
			notes++
		}
	}
	all := selected
	if recorded < len(selected) {
		all = make([]site, 0, recorded)
		for i := range selected {
			if ringRecords(&selected[i]) {
				all = append(all, selected[i])
			}
		}
	}
	if n := len(selected) - len(all) - notes; n > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: %d usdtgen probes not traced: the ring records those of packages this usdt-toolexec compiled, with at most 8 arguments (-transport bpf traces every one)\n", n)
	}
	if notes > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: %d probes not traced: their sites are notes (sites: notes), with no code to record them (-transport bpf traces them)\n", notes)
	}
	sites := all
	if opt.Stats {
		sites = statSites(all)
	}
	bySite := make(map[uint64]int, len(sites))
	var sems []uint64
	seen := map[uint64]bool{}
	for i, s := range sites {
		bySite[s.ringKey()] = i
		if s.sem != 0 && !seen[s.sem] {
			seen[s.sem] = true
			sems = append(sems, s.sem)
		}
	}
	// The values' plans take the longest to make (0.45 s of Caddy's
	// 120,000 probes): made while the command starts and the ring opens,
	// they are needed only before its probes go on.
	var names *typeNames
	described := make(chan struct{})
	if opt.Stats {
		close(described)
	} else {
		go func() {
			defer close(described)
			names, _ = describeValues(sites, opt.Binary)
		}()
	}
	f, hold, err := startRing(opt, pidfd)
	if err != nil {
		return err
	}
	defer hold.Drained()
	// Before the hold is let go: a child stopped for the tracer goes on.
	defer hold.Ignore()
	defer f.Close()
	var prepare func(*ring.Session, uint64) error
	if opt.Stats {
		prepare = func(s *ring.Session, bias uint64) error {
			l := newStatLayout(sites)
			cs := make([]ring.Site, len(sites))
			for i, site := range sites {
				cs[i] = ring.Site{Addr: site.ringKey() + bias, First: l.first[i], Timed: l.timed[i]}
			}
			return s.Count(cs, l.slots, countsAtExits(binary, sites))
		}
	} else {
		prepare = func(s *ring.Session, bias uint64) error {
			<-described
			var plans []ring.SitePlan
			for _, site := range sites {
				if site.plan != nil {
					plans = append(plans, ring.SitePlan{Addr: site.addr + bias, Ops: site.plan.Ops})
				}
			}
			return s.Plan(plans)
		}
	}
	pid := hold.Pid
	s, err := openRing(opt, pid, ctl, sems, f.resume, prepare)
	if err != nil {
		return err
	}
	defer s.Close()
	if opt.Verbose {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: attached %d probes of process %d: they record in its own memory\n", len(sites), pid)
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: transport ring: %s\n", opt.transportWhy)
		if opt.Stats {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: the program times its calls by %s\n", s.Clock())
		}
	}

	rec := make([]byte, bpfprog.RecEnd)
	dirty := len(rec)
	handle := func(*ringSession) func(*ring.Record) { return func(*ring.Record) {} }
	var finish func()
	// With events, decoded and printed on a goroutine of their own.
	var dl *deliverer
	take := func(s *ring.Session, fn func(*ring.Record), final bool) (busy bool, err error) {
		b, busy, err := s.Take(final)
		switch {
		case b == nil:
		case dl != nil:
			dl.put(s, b, fn)
		default:
			s.Deliver(b, fn)
		}
		return busy, err
	}
	var l statLayout
	if !opt.Stats {
		<-described // as openRing's prepare waited
		// The records come from the sessions' processes only.
		d, p := newDecoder(sites, 0, names), newPrinter(opt)
		d.jsonOnly = opt.JSON && opt.Events == nil
		names.early(pid)
		handle = func(s *ringSession) func(*ring.Record) {
			return func(r *ring.Record) {
				i, ok := bySite[r.Site-s.bias]
				if !ok {
					return
				}
				// Only what the last record wrote: rec is 6 KB.
				clear(rec[:dirty])
				dirty = bpfprog.RecStrings
				le.PutUint64(rec[bpfprog.RecTime:], uint64(r.Time))
				le.PutUint64(rec[bpfprog.RecPidTgid:], uint64(s.pid)<<32|uint64(r.Thread))
				le.PutUint32(rec[bpfprog.RecCookie:], uint32(i))
				if r.AfterLoss {
					le.PutUint32(rec[bpfprog.RecFlags:], bpfprog.RecAfterLoss)
				}
				// An automatic probe's first argument is the
				// goroutine, which a usdtgen probe does not pass.
				first := 1
				if sites[i].providerRing {
					first = 0
				} else {
					le.PutUint64(rec[bpfprog.RecArgs:], r.Goroutine)
				}
				for k, w := range r.Words[:min(len(r.Words), probe.MaxArgs-first)] {
					le.PutUint64(rec[bpfprog.RecArgs+8*(k+first):], w)
					if str := r.Strings[k]; str != nil {
						// NUL-terminated in its slot, as the BPF
						// program copies a string.
						at := bpfprog.RecStrings + bpfprog.StrMax*(k+first)
						dirty = max(dirty, at+copy(rec[at:], str[:min(len(str), bpfprog.StrMax-1)]))
					}
				}
				at := bpfprog.ValsAt(sites[i].strs)
				dirty = max(dirty, at+copy(rec[at:], r.Area))
				// As BPF, only where the program read the start: an
				// exit that the clock's trampoline timed.
				if sites[i].exit && len(r.Words) > 0 && r.CallerTime {
					le.PutUint64(rec[bpfprog.RecStart:], uint64(r.Time)-r.Words[0])
				}
				if ev := d.decode(rec); ev != nil {
					p.print(ev)
				}
			}
		}
		defer p.w.Flush()
		dl = newDeliverer()
		// From the trace's end on (an interrupt: the loop may be
		// waiting for room in the backlog), a further interrupt drops
		// what is left to print.
		go func() {
			select {
			case <-f.ctx.Done():
				dl.ending(func(bytes int) {
					fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: printing the %s of events recorded before the interrupt; interrupt again to drop them\n", SizeText(bytes))
				})
			case <-dl.done:
			}
		}()
		finish = func() {
			dl.ending(nil)
			dropped := dl.drain()
			p.w.Flush()
			p.finish()
			if dropped > 0 {
				fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: dropped %d events recorded before the end, as the interrupt asked\n", dropped)
			}
		}
		defer dl.drain()
	} else {
		l = newStatLayout(sites)
	}
	mainHandle := handle(s)

	// The command's processes that run the same binary, each with a
	// session of its own; their counts and losses are added here when
	// they end.
	children := map[int]*ringChild{}
	ended, endedLost := make([]uint64, l.slots), uint64(0)
	endChild := func(c *ringChild, readable bool) {
		c.stopRenewing()
		if readable {
			take(c.Session, c.handle, true)
			if n, err := c.Lost(); err == nil {
				endedLost += n
			}
			if opt.Stats {
				if counts, err := c.Counters(); err == nil {
					addCounts(ended, counts)
				}
			}
		}
		c.Close()
		delete(children, c.pid)
	}
	adopt := func(c *ring.Child) {
		defer c.Go()
		if old := children[c.Pid]; old != nil {
			// At its exit its memory is still there; after an exec,
			// another executable's.
			endChild(old, !c.Exec)
		}
		if !c.Exec || c.Pid == pid || !runsBinary(c.Pid, opt.Binary) {
			return
		}
		cs, err := openRing(opt, c.Pid, ctl, sems, nil, prepare)
		if err != nil {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d, which the command started, runs %s but is not traced: %v\n", c.Pid, opt.Binary, err)
			return
		}
		names.early(c.Pid)
		child := &ringChild{ringSession: cs, handle: handle(cs)}
		_, child.stopRenewing = renew(cs.Session)
		children[c.Pid] = child
		if opt.Verbose {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: attached %d probes of process %d, which the command started\n", len(sites), c.Pid)
		}
	}
	endChildren := func() {
		for _, c := range children {
			c.Stop()
			endChild(c, true)
		}
	}
	defer endChildren()

	var final []uint64
	read := func() ([]uint64, error) {
		if final != nil {
			return final, nil
		}
		sum, err := s.Counters()
		if err != nil {
			return nil, err
		}
		addCounts(sum, ended)
		for _, c := range children {
			if counts, err := c.Counters(); err == nil {
				addCounts(sum, counts)
			}
		}
		return sum, nil
	}
	sp := statPrinter{opt: opt, sites: sites, layout: l, w: bufio.NewWriter(opt.Stdout), prev: make([]uint64, l.slots), since: time.Now()}
	next := sp.since.Add(opt.Interval)
	lapsed, stopRenewing := renew(s.Session)
	// Counting writes no records: the reader wakes to print an
	// interval's counts and to see losses, and every wake takes a share
	// of the CPUs the program runs on.
	every := pollEvery
	if opt.Stats {
		every = countsPollEvery
		if opt.Interval > 0 {
			every = min(every, opt.Interval)
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var readErr error
	exiting, busy := false, false
	for !exiting && !f.stopped() {
		if !busy {
			select {
			case <-tick.C:
			case <-f.ctx.Done():
			case <-f.done:
			case <-hold.Exiting:
				exiting = true
			case <-lapsed:
				readErr = stopRenewing()
			case c := <-hold.Children:
				adopt(c)
				continue
			}
		}
		if readErr != nil {
			break
		}
		if busy, readErr = take(s.Session, mainHandle, exiting); readErr != nil {
			break
		}
		for _, c := range children {
			cbusy, err := take(c.Session, c.handle, false)
			if err != nil {
				// Gone without stopping at its exit (killed).
				endChild(c, false)
			}
			busy = busy || cbusy
		}
		if opt.Stats && opt.Interval > 0 && !time.Now().Before(next) {
			if err := sp.print(read); err != nil {
				return err
			}
			next = next.Add(opt.Interval)
		}
	}
	hold.Ignore()
	if err := stopRenewing(); readErr == nil {
		readErr = err
	}
	exited := errors.Is(readErr, ring.ErrExited)
	// The losses and counts are in the program's memory: read while it
	// lasts.
	lost, _ := s.Lost()
	var counts []uint64
	if opt.Stats {
		counts, _ = s.Counters()
	}
	if exiting {
		hold.Drained()
		if f.cmd != nil {
			<-f.done
		}
	} else if !exited {
		// Off first, then what is left: a program still firing would
		// otherwise keep the buffers full.
		if err := s.Stop(); err != nil && !errors.Is(err, ring.ErrExited) {
			return err
		}
		if _, err := take(s.Session, mainHandle, true); err != nil && !errors.Is(err, ring.ErrExited) {
			return err
		}
		if n, err := s.Lost(); err == nil {
			lost = n
		}
		if opt.Stats {
			counts, _ = s.Counters()
		}
	}
	endChildren()
	lost += endedLost
	if counts != nil {
		final = addCounts(counts, ended)
	}
	if !opt.Stats {
		finish()
	} else if final == nil {
		return fmt.Errorf("process %d: the counts were lost with its memory: it ended without stopping at its exit", pid)
	} else if err := sp.print(read); err != nil {
		return err
	}
	if lost > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: lost %d events: the in-process ring (%s per P) was full; -buffer makes it larger\n", lost, SizeText(int(s.size)))
	}
	if readErr != nil && !exited {
		return readErr
	}
	return f.exit()
}

// countsPollEvery is how often a counting reader wakes: it has no
// records to take, only the losses of Ps without a slot to see.
const countsPollEvery = 250 * time.Millisecond

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

// renew renews the session's lease every quarter of it, apart from the
// reading: a burst of events that takes the reader longer than the lease
// to print must not turn the probes off. lapsed is closed when a renewal
// fails; stop ends the renewals, and returns that failure.
func renew(s *ring.Session) (lapsed <-chan struct{}, stop func() error) {
	failed, done, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var err error
	go func() {
		defer close(finished)
		t := time.NewTicker(ring.Lease / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err = s.Renew(); err != nil {
					close(failed)
					return
				}
			}
		}
	}()
	return failed, sync.OnceValue(func() error {
		close(done)
		<-finished
		return err
	})
}

// ringSession is a ring.Session and the load bias of its executable.
type ringSession struct {
	*ring.Session
	pid  int
	bias uint64
	size uint64
}

// addCounts adds the counters of one process's ring to those of
// others, in place, and returns them.
func addCounts(sum, counts []uint64) []uint64 {
	for i, n := range counts {
		sum[i] += n
	}
	return sum
}

// ringChild is a process the command started that runs the same
// binary, traced through its own ring.
type ringChild struct {
	*ringSession
	handle       func(*ring.Record)
	stopRenewing func() error
}

// runsBinary reports whether process pid runs the executable binary.
func runsBinary(pid int, binary string) bool {
	exe, err1 := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	bin, err2 := os.Stat(binary)
	return err1 == nil && err2 == nil && os.SameFile(exe, bin)
}

// openRing opens the ring of process pid and turns the semaphores sems
// (link-time addresses) on; then resume, if any, lets a command started
// stopped go on.
//
// prepare, given the executable's load bias, tells the program what to
// write before the probes go on: the counts of ring.Count, or the value
// reads of ring.Plan.
func openRing(opt Options, pid int, ctl uint64, sems []uint64, resume func() error, prepare func(*ring.Session, uint64) error) (*ringSession, error) {
	ef, err := elf.Open(opt.Binary)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	bias, err := ring.Bias(pid, ef)
	if err != nil {
		return nil, err
	}
	size := opt.Buffer
	if size == 0 {
		size = ring.DefaultSize()
	}
	slots := min(ring.MaxSlots, max(runtime.NumCPU(), 8), ring.DataMax/size)
	s, err := ring.Open(pid, ctl+bias, slots, size)
	if err != nil {
		return nil, err
	}
	if prepare != nil {
		if err := prepare(s, bias); err != nil {
			s.Stop()
			s.Close()
			return nil, err
		}
	}
	abs := make([]uint64, len(sems))
	for i, a := range sems {
		abs[i] = a + bias
	}
	if err := s.Enable(abs); err != nil {
		s.Stop()
		s.Close()
		return nil, err
	}
	if resume != nil {
		if err := resume(); err != nil {
			s.Stop()
			s.Close()
			return nil, err
		}
	}
	return &ringSession{Session: s, pid: pid, bias: bias, size: uint64(size)}, nil
}

// startRing starts the command, stopped before its first instruction
// until the ring is on, or holds the process of -p, so that the events of
// either's last fires are read before its memory goes (ring.Hold).
func startRing(opt Options, pidfd int) (*follower, *ring.Hold, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	f := &follower{ctx: ctx, stop: stop, done: make(chan struct{}), pidfd: pidfd}
	if len(opt.Command) == 0 {
		h, err := ring.Seize(opt.PID)
		if err != nil {
			stop()
			return nil, nil, err
		}
		return f, h, nil
	}
	f.cmd = exec.Command(opt.Binary, opt.Command[1:]...)
	f.cmd.Args[0] = opt.Command[0]
	f.cmd.Stdin, f.cmd.Stdout, f.cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
	h, err := ring.Start(f.cmd)
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
