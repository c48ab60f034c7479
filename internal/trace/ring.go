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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
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
	var sems []ring.Semaphore
	seen := map[uint64]bool{}
	for i, s := range sites {
		bySite[s.ringKey()] = i
		if s.sem != 0 && !seen[s.sem] {
			seen[s.sem] = true
			sems = append(sems, ring.Semaphore{Addr: s.sem, Wide: s.table.WideSemaphore})
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
	renewals := &leases{sessions: map[*ring.Session]bool{}}
	if f.cmd != nil {
		defer renewals.stopWithJob()()
	}
	pid := hold.Pid
	s, err := openRing(opt, pid, ctl, sems, f.resume, prepare)
	if err != nil {
		return err
	}
	defer s.Close()
	// Should trace die, its holder runs the lease out (ring.Hold.Lease).
	hold.Lease(pid, ctl+s.bias)
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
	// A final take takes every record, a Take (at most ring.TakeMax)
	// at a time: while the last was busy, as far as the ring holds.
	take := func(s *ring.Session, fn func(*ring.Record), final bool) (busy bool, err error) {
		for range max(1, s.Slots()*int(s.Size())/ring.TakeMax+2) {
			var b *ring.Batch
			b, busy, err = s.Take(final)
			switch {
			case b == nil:
			case dl != nil:
				dl.put(s, b, fn)
			default:
				s.Deliver(b, fn)
			}
			if !final || !busy || err != nil {
				break
			}
		}
		return busy, err
	}
	var l statLayout
	// forget drops what trace keeps of a process it traced once the
	// events it took of it have been printed: what it holds stays
	// bounded by the processes it traces, not those it ever traced.
	forget := func(pid int) {}
	if !opt.Stats {
		<-described // as openRing's prepare waited
		// The records come from the sessions' processes only.
		d, p := newDecoder(sites, 0, names), newPrinter(opt)
		d.jsonOnly = opt.JSON && opt.Events == nil
		names.early(pid)
		var env []string
		if f.cmd != nil {
			env = f.cmd.Environ()
		}
		opt.started(pid, env)
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
		forget = func(pid int) {
			dl.after(func() {
				d.forget(pid)
				names.forget(pid)
			})
		}
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
	// execed says that the traced process ran another executable.
	execed := false
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
		forget(c.pid)
	}
	adopt := func(c *ring.Child) {
		defer c.Go()
		if old := children[c.Pid]; old != nil {
			// At its exit its memory is still there; after an exec,
			// another executable's.
			endChild(old, !c.Exec)
		}
		if c.Exec && c.Pid == pid {
			// The command ran another executable: its session's
			// memory is gone.
			execed = true
			return
		}
		if runs, _ := runsExe(c.Pid, opt.exe); !c.Exec || !runs {
			return
		}
		cs, err := openRing(opt, c.Pid, ctl, sems, nil, prepare)
		if err != nil {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d, which the command started, runs %s but is not traced: %v\n", c.Pid, opt.Binary, err)
			return
		}
		names.early(c.Pid)
		opt.started(c.Pid, nil)
		hold.Lease(c.Pid, ctl+cs.bias)
		child := &ringChild{ringSession: cs, handle: handle(cs)}
		_, child.stopRenewing = renewals.renew(cs.Session)
		children[c.Pid] = child
		if opt.Verbose {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: attached %d probes of process %d, which the command started\n", len(sites), c.Pid)
		}
	}
	endChildren := func() {
		for _, c := range children {
			// The renewals end first: one after Stop would find the
			// probes off and fail.
			c.stopRenewing()
			c.Stop()
			endChild(c, true)
		}
	}
	defer endChildren()

	var final []uint64
	// A process that trace does not hold at its exit (-p) goes with what
	// it wrote since trace last read its ring: kept is what trace read
	// at each poll, at keptAt.
	unheld := f.cmd == nil
	var kept []uint64
	var keptLost, keptNoSlot uint64
	keptAt := time.Now()
	exit := watchExit(f.pidfd)
	defer exit.stop()
	read := func() ([]uint64, error) {
		if final != nil {
			return final, nil
		}
		sum, err := s.Counters()
		if err != nil && kept != nil && errors.Is(err, ring.ErrExited) {
			return slices.Clone(kept), nil
		}
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
	lapsed, stopRenewing := renewals.renew(s.Session)
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
	// lapse says that readErr is the lease's: trace was stopped or
	// starved past it.
	exiting, busy, lapse := false, false, false
	// How long the last read of the counters took, and so when the next
	// may be: every poll, unless that costs more than a twentieth of the
	// time (Caddy's every function has 100 MB of counters).
	nextCounts := time.Now()
	for !exiting && !execed && !f.stopped() {
		if !busy {
			select {
			case <-exit.gone:
			case <-tick.C:
			case <-f.ctx.Done():
			case <-f.done:
			case <-hold.Exiting:
				exiting = true
			case <-lapsed:
				readErr, lapse = stopRenewing(), true
			case c := <-hold.Children:
				adopt(c)
				continue
			}
		}
		if readErr != nil {
			break
		}
		polled := time.Now()
		// The holder of -- CMD holds it where it waits for trace only
		// while trace beats: a trace that stops reading stops no one.
		hold.Beat()
		if busy, readErr = take(s.Session, mainHandle, exiting); readErr != nil {
			break
		}
		s.followProcs(opt)
		// What -p's process, or a command that runs another
		// executable, leaves with its memory: kept as read.
		if opt.Stats && !polled.Before(nextCounts) {
			if c, err := s.Counters(); err == nil {
				kept, keptAt = c, polled
				if opt.Counts != nil {
					sum := addCounts(slices.Clone(c), ended)
					for _, c := range children {
						if counts, err := c.Counters(); err == nil {
							addCounts(sum, counts)
						}
					}
					opt.Counts(statSnapshot(sites, l, sum, keptLost, 1+len(children)))
				}
			}
			nextCounts = time.Now().Add(20 * time.Since(polled))
		} else if !opt.Stats {
			// Take leaves the records of the last HoldBack.
			keptAt = polled.Add(-ring.HoldBack)
		}
		if n, err := s.Lost(); err == nil {
			keptLost = n
		}
		if n, err := s.NoSlot(); err == nil {
			keptNoSlot = n
		}
		for _, c := range children {
			cbusy, err := take(c.Session, c.handle, false)
			if err != nil {
				// Gone without stopping at its exit (killed).
				endChild(c, false)
				continue
			}
			c.followProcs(opt)
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
	noSlot, err := s.NoSlot()
	if err != nil {
		noSlot = keptNoSlot
	}
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
		if n, err := s.NoSlot(); err == nil {
			noSlot = n
		}
		// What the first read took stays, should the memory go since:
		// then the process is exiting, or ran another executable.
		if opt.Stats {
			if c, err := s.Counters(); err == nil {
				counts = c
			} else if errors.Is(err, ring.ErrExited) {
				exited = true
			}
		}
	}
	endChildren()
	lost += endedLost
	// Its memory gone, and the process not: it ran another executable,
	// whose memory trace does not write to. The holder of -- CMD tells
	// (adopt); of -p, the process's executable does: a process whose
	// memory is gone has none while it exits, so one that has an
	// executable, and whose pidfd does not say that it exited (its pid
	// taken again), runs a new one, another file or the same again.
	// Short of that, that it lives on a second later.
	runs, alive := runsExe(pid, opt.exe)
	if exited && alive && (!runs || f.pidfd >= 0 && !readable(f.pidfd)) {
		execed = true
	}
	var at time.Time
	gone := false
	if unheld && !execed {
		at, gone = exit.exited(exited)
		execed = exited && !gone
	}
	if gone || execed {
		if counts == nil {
			counts = kept
		}
		lost = max(lost, keptLost)
		what, since := "the events it recorded since are lost", "the events it recorded since trace last read its ring are lost"
		if opt.Stats {
			what, since = "the calls it made since are not counted", "the calls it made since trace last read its ring are not counted"
		}
		switch {
		case execed:
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d ran another executable: its trace ends, and %s\n", pid, since)
		case counts != nil || !opt.Stats:
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d exited %v after trace last read its ring: %s\n", pid, at.Sub(keptAt).Round(time.Millisecond), what)
		}
	}
	if counts != nil {
		final = addCounts(counts, ended)
		if opt.Counts != nil {
			opt.Counts(statSnapshot(sites, l, final, lost, 0))
		}
	}
	if !opt.Stats {
		finish()
	} else if final == nil && execed && f.cmd != nil {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d ran another executable before trace read its counts\n", pid)
	} else if final == nil && execed {
		return fmt.Errorf("process %d ran another executable before trace read its counts", pid)
	} else if final == nil && unheld {
		if opt.Verbose {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d: its memory gone: %v, an executable: %v, the same file: %v, gone: %v\n", pid, exited, alive, runs, gone)
		}
		return fmt.Errorf("process %d exited before trace read its counts", pid)
	} else if final == nil {
		return fmt.Errorf("process %d: the counts were lost with its memory: it ended without stopping at its exit", pid)
	} else if err := sp.print(read); err != nil {
		return err
	}
	// Of Ps without a buffer: a GOMAXPROCS raised past the ring's
	// room, or between two polls.
	noSlot = min(noSlot, lost)
	if full := lost - noSlot; full > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: lost %d events: the in-process ring (%s per P) was full; -buffer makes it larger\n", full, SizeText(int(s.size)))
	}
	if noSlot > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: lost %d events of Ps without a buffer in the ring: the program raised its GOMAXPROCS\n", noSlot)
	}
	if (readErr != nil && lapse || execed) && f.cmd != nil {
		// The command is trace's to wait for, and its status to
		// return: it goes on as it would untraced.
		if !execed {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: %v: %s goes on untraced\n", readErr, opt.Command[0])
		}
		hold.Drained()
		hold.Ignore()
		<-f.done
		return f.exit()
	}
	if readErr != nil && !exited {
		return readErr
	}
	return f.exit()
}

// programProcs returns the GOMAXPROCS of process pid, which runs the
// executable ef at bias: its runtime.gomaxprocs; before its runtime has
// set it (a command stopped at its exec), or where the executable has no
// symbols, its environment's GOMAXPROCS, or this machine's CPUs.
func programProcs(pid int, ef *elf.File, bias uint64) int {
	if n := runningProcs(pid, ef, bias); n > 0 {
		return n
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for kv := range strings.SplitSeq(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					return min(n, ring.MaxSlots)
				}
			}
		}
	}
	return runtime.NumCPU()
}

// runningProcs reads runtime.gomaxprocs of process pid, 0 where it
// cannot.
func runningProcs(pid int, ef *elf.File, bias uint64) int {
	at := procsAddr(ef)
	if at == 0 {
		return 0
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return 0
	}
	defer mem.Close()
	var b [4]byte
	if _, err := mem.ReadAt(b[:], int64(at+bias)); err != nil {
		return 0
	}
	return max(0, min(int(int32(le.Uint32(b[:]))), ring.MaxSlots))
}

// procsAddr is where the executable ef has runtime.gomaxprocs, at link
// time: 0 where it has no such symbol.
func procsAddr(ef *elf.File) uint64 {
	syms, _ := ef.Symbols()
	for _, sym := range syms {
		if sym.Name == "runtime.gomaxprocs" && sym.Size == 4 {
			return sym.Value
		}
	}
	return 0
}

// followProcs gives the Ps that the program added since the last poll
// (it raised GOMAXPROCS) buffers of their own, and says once when the
// ring has no room for them all: their events are lost, and counted.
func (rs *ringSession) followProcs(opt Options) {
	if rs.procsAt == 0 {
		return
	}
	v, err := rs.Uint32(rs.procsAt)
	n := min(int(int32(v)), ring.MaxSlots)
	if err != nil || n <= rs.Slots() {
		return
	}
	got, err := rs.Grow(n)
	if err == nil && got < n && !rs.toldProcs {
		rs.toldProcs = true
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d raised GOMAXPROCS to %d, and its ring has room for the buffers of %d Ps: the events of the others are lost, and counted (a smaller -buffer makes room for more)\n", rs.pid, n, got)
	}
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
// fails; stop ends the renewals, and returns that failure. The session
// is one of the trace's leases meanwhile.
func (l *leases) renew(s *ring.Session) (lapsed <-chan struct{}, stop func() error) {
	l.mu.Lock()
	l.sessions[s] = true
	l.mu.Unlock()
	failed, end := ring.Renewing(func() error {
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

// leases are the sessions a trace renews.
type leases struct {
	// mu is held for writing while trace is stopped with its job.
	mu       sync.RWMutex
	sessions map[*ring.Session]bool
}

// jobLease is how long a lease lasts while trace is stopped with the
// command's job (Ctrl-Z).
const jobLease = 24 * time.Hour

// stopWithJob has trace stop as it would by default when it takes
// SIGTSTP (Ctrl-Z), SIGTTIN or SIGTTOU (a background job's read or write
// of the terminal), which go to the whole process group, the command's
// processes too: those stop as well, and so does whoever reads their
// rings. The leases last jobLease meanwhile: the job goes on when it
// takes a SIGCONT (fg, bg), the program maybe before trace renews them,
// and a lease run out would turn its probes off. stop ends it.
func (l *leases) stopWithJob() (stop func()) {
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
			// meanwhile: stopped first, trace would leave the program's
			// other threads running.
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
		state, ok := ring.StatusField(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()), "State")
		if ok && state != "" && state[0] != 'T' && state[0] != 't' && state[0] != 'Z' && state[0] != 'X' {
			return false
		}
	}
	return true
}

// stopSelf stops trace, with the default action of sig, until a SIGCONT.
// signal.Reset would leave the runtime's handler, which ignores sig: the
// default goes in for the one signal, and the handler back after it.
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

// ringSession is a ring.Session and the load bias of its executable.
type ringSession struct {
	*ring.Session
	pid  int
	bias uint64
	size uint64
	// procsAt is where the process has runtime.gomaxprocs, 0 where
	// the executable does not say; toldProcs, that trace said the ring
	// has no room for the buffers of all its Ps.
	procsAt   uint64
	toldProcs bool
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

// runsExe reports whether process pid runs the executable exe; alive is
// false where /proc shows it none (gone, or a zombie).
func runsExe(pid int, exe os.FileInfo) (runs, alive bool) {
	now, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && os.SameFile(now, exe), err == nil
}

// openRing opens the ring of process pid and turns the semaphores sems
// (link-time addresses) on; then resume, if any, lets a command started
// stopped go on.
//
// prepare, given the executable's load bias, tells the program what to
// write before the probes go on: the counts of ring.Count, or the value
// reads of ring.Plan.
func openRing(opt Options, pid int, ctl uint64, sems []ring.Semaphore, resume func() error, prepare func(*ring.Session, uint64) error) (*ringSession, error) {
	ef, err := elf.Open(opt.Binary)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	_, where, _ := ring.Address(ef)
	bias, err := ring.Bias(pid, ef)
	if err != nil {
		return nil, err
	}
	// A buffer for each of the program's Ps, as many as its GOMAXPROCS,
	// which may be more than this machine's CPUs, or fewer.
	procs := programProcs(pid, ef, bias)
	size := opt.Buffer
	if size == 0 {
		size = ring.SizeFor(procs)
	}
	slots := min(ring.MaxSlots, max(procs, 8), ring.DataMax/size)
	s, err := ring.Open(pid, ctl+bias, where+bias, slots, size)
	if err != nil {
		return nil, err
	}
	// The memory Open took is the process's as it ran the executable
	// trace read, or it has run another since.
	if runs, _ := runsExe(pid, opt.exe); !runs {
		s.Close()
		return nil, fmt.Errorf("process %d no longer runs %s: it ran another executable since trace read it", pid, opt.Binary)
	}
	defer s.Keep()()
	if prepare != nil {
		if err := prepare(s, bias); err != nil {
			s.Stop()
			s.Close()
			return nil, err
		}
	}
	abs := make([]ring.Semaphore, len(sems))
	for i, sem := range sems {
		abs[i] = ring.Semaphore{Addr: sem.Addr + bias, Wide: sem.Wide}
	}
	// The semaphores are written by the process's id: an exec while
	// the plans were made, or while they are written, is seen in the
	// memory the session holds, which it takes away.
	if err := s.Same(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Enable(abs); err != nil {
		s.Stop()
		s.Close()
		return nil, err
	}
	if err := s.Same(); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: while trace turned its probes on, which may be left on in the executable it runs now", err)
	}
	if resume != nil {
		if err := resume(); err != nil {
			s.Stop()
			s.Close()
			return nil, err
		}
	}
	rs := &ringSession{Session: s, pid: pid, bias: bias, size: uint64(size)}
	if at := procsAddr(ef); at != 0 {
		rs.procsAt = at + bias
	}
	return rs, nil
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
