package trace

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
)

// ringTrace is one trace through the rings of a process and of the
// processes its command starts that run the same binary. Each process's
// session is a ring.Tracee, which owns its life; ringTrace reads what
// they record, and says what was lost.
type ringTrace struct {
	opt    Options
	binary []site
	// sites are those the rings record: bySite by ringKey.
	sites  []site
	bySite map[uint64]int
	sems   []ring.Semaphore
	ctl    uint64
	layout statLayout
	f      *follower
	hold   *ring.Hold
	leases *ring.Leases
	// described is closed when names, the values' plans, are made.
	names     *typeNames
	described chan struct{}

	// sampling says that the program samples the calls (Options.Sampling)
	// by roles, each site's (ring.SitePlan's Role), by index.
	sampling bool
	roles    []uint16
	// left is where the programs count the calls their sampling left
	// out (ended has the ended processes' counts, and endedByCaller
	// those their callers left out).
	left          leftLayout
	endedByCaller uint64

	main       *ringSession
	mainHandle func(*ring.Record)
	// handle returns what takes a session's records: decodes and
	// prints them, or nothing while counting.
	handle func(*ringSession) func(*ring.Record)
	// dl delivers the records to be decoded and printed on a goroutine
	// of its own; nil while counting.
	dl *deliverer
	// forget drops what the trace keeps of a process it traced once
	// the events it took of it have been printed.
	forget func(pid int)

	// children are the command's processes that run the same binary;
	// their counts and losses are added to ended and endedLost when
	// they end.
	children  map[int]*ringChild
	ended     []uint64
	endedLost uint64
	endedAny  bool // ended holds a child's counts
	// execed says that the traced process ran another executable.
	execed bool

	// A process that trace does not hold at its exit (-p) goes with
	// what it wrote since trace last read its ring: kept is what trace
	// read at each poll, at keptAt.
	kept                 []uint64
	keptLost, keptNoSlot uint64
	keptAt               time.Time
	// An idle program counts nothing: the reads of its counters while
	// it runs (reads) skip those where its CPU time (procstat.CPUTime)
	// shows that no thread ran since the last, and reuse their buffers.
	reads countReads
	// final are the counts at the end, once read.
	final []uint64
	exit  *exitWatch
	// switches are those of the traced functions with traced copies.
	switches *switchPlan
}

// ringSession is a traced process and the load bias of its executable.
type ringSession struct {
	*ring.Tracee
	pid  int
	bias uint64
	// sw switches the process's traced functions to their traced
	// copies; nil for a build without.
	sw *procSwitch
}

// Detach switches the process's functions back, then turns the probes
// and the ring off (ring.Tracee.Detach).
func (s *ringSession) Detach() error {
	s.sw.off()
	return s.Tracee.Detach()
}

// ringChild is a process the command started that runs the same
// binary, traced through its own ring.
type ringChild struct {
	*ringSession
	handle func(*ring.Record)
}

// newRingTrace picks the sites the ring records from selected, saying
// on stderr which it leaves out, and starts making their values' plans.
func newRingTrace(opt Options, binary, selected []site, ctl uint64) *ringTrace {
	// By index, and copied only when some are left out: a site is 400
	// bytes, and Caddy has 120,000 of them.
	// The notes on the code of functions with traced copies are left
	// out without a word: the copies' code is recorded.
	recorded, notes, plainNotes := 0, 0, 0
	plain := plainOfCopies(selected)
	for i := range selected {
		switch {
		case ringRecords(&selected[i]):
			recorded++
		case plain(&selected[i]):
			plainNotes++
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
	if n := len(selected) - len(all) - notes - plainNotes; n > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: %d usdtgen probes not traced: the ring records those of packages this usdt-toolexec compiled, with at most 8 arguments (-transport bpf traces every one)\n", n)
	}
	if notes > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: %d probes not traced: their sites are notes (sites: notes), with no code to record them (-transport bpf traces them)\n", notes)
	}
	t := &ringTrace{opt: opt, binary: binary, sites: all, ctl: ctl, leases: ring.NewLeases(), children: map[int]*ringChild{}, keptAt: time.Now()}
	if opt.Stats {
		t.sites = statSites(all)
		t.layout = newStatLayout(t.sites)
	}
	if opt.Sampling && opt.Sample < 1 && !opt.Stats && samplesInProgram(opt.Binary) {
		t.sampling, t.roles = true, sampleRoles(t.sites)
		t.left = newLeftLayout(t.sites, t.roles)
	}
	t.ended = make([]uint64, max(t.layout.slots, t.left.n))
	t.bySite = make(map[uint64]int, len(t.sites))
	seen := map[uint64]bool{}
	for i, s := range t.sites {
		t.bySite[s.ringKey()] = i
		if s.sem != 0 && !seen[s.sem] {
			seen[s.sem] = true
			t.sems = append(t.sems, ring.Semaphore{Addr: s.sem, Wide: s.table.WideSemaphore})
		}
	}
	// The values' plans take the longest to make (0.45 s of Caddy's
	// 120,000 probes): made while the command starts and the ring opens,
	// they are needed only before its probes go on.
	t.described = make(chan struct{})
	t.handle = func(*ringSession) func(*ring.Record) { return func(*ring.Record) {} }
	t.forget = func(int) {}
	if opt.Stats {
		close(t.described)
	} else {
		go func() {
			defer close(t.described)
			t.names, _ = describeValues(t.sites, opt.Binary, opt.NoValues)
		}()
	}
	return t
}

// attach attaches to process pid, which runs the binary (ring.Attach),
// and switches its traced functions to their traced copies; resume, if
// any, lets a command started stopped go on. held says that the process
// is held stopped at its exec until then (or, without resume, until
// attach returns): its functions are switched before its first
// instruction.
func (t *ringTrace) attach(pid int, resume func() error, held bool) (*ringSession, error) {
	ef, err := elf.Open(t.opt.Binary)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	_, where, _ := ring.Address(ef)
	bias, err := ring.Bias(pid, ef)
	if err != nil {
		return nil, err
	}
	var procsAt uint64
	if at := ring.ProcsAddr(ef); at != 0 {
		procsAt = at + bias
	}
	// A buffer for each of the program's Ps, as many as its GOMAXPROCS,
	// which may be more than this machine's CPUs, or fewer.
	procs, buffer := ring.Procs(pid, procsAt), t.opt.Buffer
	if t.sampling && buffer == 0 {
		// Half the room: the program writes the events of a share of
		// its calls, and counts the others in counters past the
		// buffers (ring.CountLeftOut).
		buffer = max(ring.SizeFor(procs)/2, 4096)
	}
	slots, size := ring.SlotsFor(procs, buffer)
	sems := make([]ring.Semaphore, len(t.sems))
	for i, sem := range t.sems {
		sems[i] = ring.Semaphore{Addr: sem.Addr + bias, Wide: sem.Wide}
	}
	sw := t.switches.process(pid, bias)
	if held && sw != nil {
		sw.kept = true
	}
	if held && resume != nil {
		// Once the probes are on, before the command's first
		// instruction.
		inner := resume
		resume = func() error {
			sw.on(true)
			return inner()
		}
	}
	target := ring.Target{
		Pid: pid, Ctl: t.ctl + bias, Where: where + bias, ProcsAt: procsAt,
		Slots: slots, Size: size, Sems: sems,
		Runs:    func() bool { runs, _ := runsExe(pid, t.opt.exe); return runs },
		Prepare: func(s *ring.Session) error { return t.prepare(s, bias) },
		Resume:  resume,
		Leases:  t.leases,
		Hold:    t.hold,
	}
	tr, err := ring.Attach(target)
	if err != nil {
		return nil, err
	}
	if !held || resume == nil {
		sw.on(held)
	}
	return &ringSession{Tracee: tr, pid: pid, bias: bias, sw: sw}, nil
}

// prepare tells the program of a session at bias what to write: the
// counts of ring.Count, or the value reads of ring.Plan.
func (t *ringTrace) prepare(s *ring.Session, bias uint64) error {
	if t.opt.Stats {
		cs := make([]ring.Site, len(t.sites))
		for i, site := range t.sites {
			cs[i] = ring.Site{Addr: site.ringKey() + bias, First: t.layout.first[i], Timed: t.layout.timed[i]}
		}
		return s.Count(cs, t.layout.slots, countsAtExits(t.binary, t.sites))
	}
	<-t.described
	var plans []ring.SitePlan
	for i, site := range t.sites {
		p := ring.SitePlan{Addr: site.ringKey() + bias}
		if site.plan != nil {
			p.Ops = site.plan.Ops
		}
		if t.sampling {
			p.Role = t.roles[i]
		}
		if p.Ops != nil || p.Role != 0 {
			plans = append(plans, p)
		}
	}
	err := errors.Join(s.Plan(plans), s.Block(t.opt.Block))
	if t.sampling {
		// The calls left out counted in the program, or, where its ring
		// has no room for the counters, a compact record of each for a
		// consumer that counts them.
		compact := false
		if cerr := s.CountLeftOut(t.left.ringSites(t.sites, bias), t.left.n); cerr != nil {
			compact = t.opt.Counted != nil
			if t.opt.Verbose {
				fmt.Fprintf(t.opt.Stderr, "usdt-toolexec trace: the calls -sample leaves out go to trace one by one: %v\n", cerr)
			}
		}
		err = errors.Join(err, s.Sample(t.opt.Sample, compact))
	}
	return errors.Join(err, s.TimeByTicks())
}

// startEvents sets the trace up to decode and print the events of the
// main session's process, and returns what flushes them at the end.
func (t *ringTrace) startEvents() (finish, flush func()) {
	opt, sites := t.opt, t.sites
	<-t.described // as prepare waited
	// The records come from the sessions' processes only.
	d, p := newDecoder(sites, 0, t.names), newPrinter(opt)
	d.jsonOnly = opt.JSON && opt.Events == nil
	t.names.early(t.main.pid)
	var env []string
	if t.f.cmd != nil {
		env = t.f.cmd.Environ()
	}
	opt.started(t.main.pid, env)
	rec := make([]byte, bpfprog.RecEnd)
	dirty := len(rec)
	t.handle = func(s *ringSession) func(*ring.Record) {
		return func(r *ring.Record) {
			i, ok := t.bySite[r.Site-s.bias]
			if !ok {
				return
			}
			if r.Compact {
				if opt.Counted != nil && len(r.Words) == 1 {
					t.counted(&sites[i], r.Words[0])
				}
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
			// An automatic probe's first argument is the goroutine,
			// which a usdtgen probe does not pass.
			first := 1
			if sites[i].providerRing {
				first = 0
			} else {
				le.PutUint64(rec[bpfprog.RecArgs:], r.Goroutine)
			}
			for k, w := range r.Words[:min(len(r.Words), probe.MaxArgs-first)] {
				le.PutUint64(rec[bpfprog.RecArgs+8*(k+first):], w)
				if str := r.Strings[k]; str != nil {
					// NUL-terminated in its slot, as the BPF program
					// copies a string.
					at := bpfprog.RecStrings + bpfprog.StrMax*(k+first)
					dirty = max(dirty, at+copy(rec[at:], str[:min(len(str), bpfprog.StrMax-1)]))
				}
			}
			at := bpfprog.ValsAt(sites[i].strs)
			dirty = max(dirty, at+copy(rec[at:], r.Area))
			// As BPF, only where the program read the start: an exit
			// that the clock's trampoline timed.
			if sites[i].exit && len(r.Words) > 0 && r.CallerTime {
				le.PutUint64(rec[bpfprog.RecStart:], uint64(r.Time)-r.Words[0])
			}
			// Up to the farthest byte written, as BPF sends a record: the
			// event keeps a copy of its value area until it is read.
			if ev := d.decode(rec[:dirty]); ev != nil {
				ev.Sampled = t.sampling
				p.print(ev)
			}
		}
	}
	dl := newDeliverer()
	t.dl = dl
	t.forget = func(pid int) {
		dl.after(func() {
			d.forget(pid)
			t.names.forget(pid)
		})
	}
	// From the trace's end on (an interrupt: the loop may be waiting for
	// room in the backlog), a further interrupt drops what is left to
	// print.
	go func() {
		select {
		case <-t.f.ctx.Done():
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
	return finish, func() {
		dl.drain()
		p.w.Flush()
	}
}

// blockTake is the least room in the backlog a reader for probes that
// wait (-block) waits for before it takes from the ring.
const blockTake = 1 << 20

// take takes the records of a session's ring and hands them to fn. A
// final take takes every record, a Take (at most ring.TakeMax) at a time:
// while the last was busy, as far as the ring holds.
func (t *ringTrace) take(s *ringSession, fn func(*ring.Record), final bool) (busy bool, err error) {
	for range max(1, s.Slots()*s.Size()/ring.TakeMax+2) {
		var b *ring.Batch
		if t.opt.Block > 0 && t.dl != nil && !final {
			// The probes wait for room in the ring: free it as the
			// backlog frees room, a MiB or more at a time. A Take
			// of ring.TakeMax, waiting for the backlog to drain below
			// its bound, left the ring full for seconds at a time,
			// longer than the probes wait (bbolt's TestDB_ tests
			// under -block 1s into Jaeger lost 70,587 and 1,205,116
			// events so).
			b, busy, err = s.TakeUpTo(final, t.dl.room(blockTake))
		} else {
			b, busy, err = s.Take(final)
		}
		switch {
		case b == nil:
		case t.dl != nil:
			t.dl.put(s.Session, b, fn)
		default:
			s.Deliver(b, fn)
		}
		if !final || !busy || err != nil {
			break
		}
	}
	return busy, err
}

// followProcs has a session's ring follow its program's GOMAXPROCS, and
// says once when it has no room for every P.
func (t *ringTrace) followProcs(s *ringSession) {
	if n, got := s.FollowProcs(); n > 0 {
		fmt.Fprintf(t.opt.Stderr, "usdt-toolexec trace: process %d raised GOMAXPROCS to %d, and its ring has room for the buffers of %d Ps: the events of the others are lost, and counted (a smaller -buffer makes room for more)\n", s.pid, n, got)
	}
}

// adopt traces a process the command started, or ran another
// executable in, if it runs the binary.
func (t *ringTrace) adopt(c *ring.Child) {
	defer c.Go()
	if old := t.children[c.Pid]; old != nil {
		// At its exit its memory is still there; after an exec,
		// another executable's.
		t.endChild(old, !c.Exec)
	}
	if c.Exec && c.Pid == t.main.pid {
		// The command ran another executable: its session's memory
		// is gone.
		t.execed = true
		return
	}
	if runs, _ := runsExe(c.Pid, t.opt.exe); !c.Exec || !runs {
		return
	}
	cs, err := t.attach(c.Pid, nil, true)
	if err != nil {
		fmt.Fprintf(t.opt.Stderr, "usdt-toolexec trace: process %d, which the command started, runs %s but is not traced: %v\n", c.Pid, t.opt.Binary, err)
		return
	}
	t.names.early(c.Pid)
	t.opt.started(c.Pid, nil)
	t.children[c.Pid] = &ringChild{ringSession: cs, handle: t.handle(cs)}
	if t.opt.Verbose {
		fmt.Fprintf(t.opt.Stderr, "usdt-toolexec trace: attached %d probes of process %d, which the command started\n", len(t.sites), c.Pid)
	}
}

// endChild ends the session of a child, taking what its ring holds
// where its memory is readable still.
func (t *ringTrace) endChild(c *ringChild, readable bool) {
	c.sw.off()
	c.EndRenewals()
	if readable {
		t.take(c.ringSession, c.handle, true)
		if n, err := c.Lost(); err == nil {
			t.endedLost += n
		}
		if t.opt.Stats || t.sampling {
			if counts, err := c.Counters(); err == nil {
				addCounts(t.ended, counts)
				t.endedAny = true
			}
		}
		if t.sampling {
			if n, err := c.LeftByCaller(); err == nil {
				t.endedByCaller += n
			}
		}
	}
	c.Close()
	delete(t.children, c.pid)
	t.forget(c.pid)
}

// endChildren detaches from every child.
func (t *ringTrace) endChildren() {
	for _, c := range t.children {
		c.Detach()
		t.endChild(c, true)
	}
}

// counts sums the counters of every session, and of the children that
// ended; the final ones, once read.
func (t *ringTrace) counts() ([]uint64, error) {
	if t.final != nil {
		return t.final, nil
	}
	sum, err := t.main.Counters()
	if err != nil && t.kept != nil && errors.Is(err, ring.ErrExited) {
		return slices.Clone(t.kept), nil
	}
	if err != nil {
		return nil, err
	}
	return t.addChildren(sum), nil
}

// withChildren reports whether the trace has children, running or ended,
// whose counts the main process's CPU time says nothing of.
func (t *ringTrace) withChildren() bool { return len(t.children) > 0 || t.endedAny }

// addChildren adds the counts of the children, ended and running, to
// sum, and returns it.
func (t *ringTrace) addChildren(sum []uint64) []uint64 {
	addCounts(sum, t.ended)
	for _, c := range t.children {
		if counts, err := c.Counters(); err == nil {
			addCounts(sum, counts)
		}
	}
	return sum
}

// poll reads the rings until the trace ends: the process exits or runs
// another executable, an interrupt, the command's end, or the lease
// lapsed (lapse), which readErr then says.
func (t *ringTrace) poll(sp *statPrinter) (readErr error, lapse, exiting bool, err error) {
	opt, s, hold := t.opt, t.main, t.hold
	next := sp.since.Add(opt.Interval)
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
	waiting, idle := every, idleWatch{}
	busy := false
	// How long the last read of the counters took, and so when the next
	// may be: every poll, unless that costs more than a twentieth of the
	// time (Caddy's every function has 100 MB of counters).
	nextCounts := time.Now()
	for !exiting && !t.execed && !t.f.stopped() {
		if !busy {
			select {
			case <-t.exit.gone:
			case <-tick.C:
			case <-t.f.ctx.Done():
			case <-t.f.done:
			case <-hold.Exiting:
				exiting = true
			case <-s.Lapsed():
				readErr, lapse = s.EndRenewals(), true
			case c := <-hold.Children:
				t.adopt(c)
				continue
			}
		}
		if readErr != nil {
			break
		}
		polled := time.Now()
		// Read before the counters: where the program did not run
		// since, they are what they were (countRead, idleWatch).
		cpu := cpuTime(s.pid)
		// The holder of -- CMD holds it where it waits for trace only
		// while trace beats: a trace that stops reading stops no one.
		hold.Beat()
		if busy, readErr = t.take(s, t.mainHandle, exiting); readErr != nil {
			break
		}
		t.followProcs(s)
		// What -p's process, or a command that runs another
		// executable, leaves with its memory: kept as read.
		if t.sampling && opt.Counts != nil && !polled.Before(nextCounts) {
			if c, changed, err := t.reads.left.read(s, cpu, t.withChildren()); err == nil && changed {
				t.reads.sum = t.left.sumInto(t.reads.sum, c)
				snap, _ := t.left.snapshot(t.sites, t.addChildren(t.reads.sum))
				opt.Counts(snap)
			}
			// Once a second at most, for the metrics: read on every
			// poll, an idle trace of every function of net/http spent
			// 70 % of a CPU on them.
			nextCounts = time.Now().Add(max(time.Second, 20*time.Since(polled)))
		}
		if opt.Stats && !polled.Before(nextCounts) {
			if c, changed, err := t.reads.kept.read(s, cpu, t.withChildren()); err == nil {
				t.kept, t.keptAt = c, polled
				// The losses of the snapshot are those the last poll
				// read: one more snapshot carries what the counters'
				// last change left them at.
				if (changed || t.keptLost != t.reads.lost) && opt.Counts != nil {
					t.reads.sum = t.addChildren(append(t.reads.sum[:0], c...))
					opt.Counts(statSnapshot(t.sites, t.layout, t.reads.sum, t.keptLost, 1+len(t.children)))
					t.reads.lost = t.keptLost
				}
			}
			nextCounts = time.Now().Add(20 * time.Since(polled))
		} else if !opt.Stats {
			// Take leaves the records of the last HoldBack.
			t.keptAt = polled.Add(-ring.HoldBack)
		}
		if n, err := s.Lost(); err == nil {
			t.keptLost = n
		}
		if n, err := s.NoSlot(); err == nil {
			t.keptNoSlot = n
		}
		for _, c := range t.children {
			cbusy, err := t.take(c.ringSession, c.handle, false)
			if err != nil {
				// Gone without stopping at its exit (killed).
				t.endChild(c, false)
				continue
			}
			t.followProcs(c.ringSession)
			busy = busy || cbusy
		}
		if opt.Stats && opt.Interval > 0 && !time.Now().Before(next) {
			if err := sp.print(t.counts); err != nil {
				return readErr, lapse, exiting, err
			}
			next = next.Add(opt.Interval)
		}
		// Where -block has writers wait for room, they wait for the
		// reader: it keeps its pace.
		if !busy && every < idleEvery && opt.Block == 0 {
			if d := idle.every(cpu, every, len(t.children) == 0); d != waiting {

				tick.Reset(d)
				waiting = d
			}
		}
	}
	return readErr, lapse, exiting, nil
}

// end ends the trace after poll: it detaches from a process that lives
// on, takes what is left, says what was lost, prints the counts, and
// returns the command's exit.
func (t *ringTrace) end(sp *statPrinter, finish func(), readErr error, lapse, exiting bool) error {
	opt, s, hold, f, pid := t.opt, t.main, t.hold, t.f, t.main.pid
	hold.Ignore()
	if err := s.EndRenewals(); readErr == nil {
		readErr = err
	}
	exited := errors.Is(readErr, ring.ErrExited)
	// The losses and counts are in the program's memory: read while it
	// lasts.
	lost, _ := s.Lost()
	noSlot, err := s.NoSlot()
	if err != nil {
		noSlot = t.keptNoSlot
	}
	var counts []uint64
	if opt.Stats || t.sampling {
		counts, _ = s.Counters()
	}
	byCaller, _ := s.LeftByCaller()
	if exiting {
		hold.Drained()
		if f.cmd != nil {
			<-f.done
		}
	} else if !exited {
		// Off first, then what is left: a program still firing would
		// otherwise keep the buffers full.
		if err := s.Detach(); err != nil && !errors.Is(err, ring.ErrExited) {
			return err
		}
		if _, err := t.take(s, t.mainHandle, true); err != nil && !errors.Is(err, ring.ErrExited) {
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
		if opt.Stats || t.sampling {
			if c, err := s.Counters(); err == nil {
				counts = c
			} else if errors.Is(err, ring.ErrExited) && opt.Stats {
				exited = true
			}
		}
		if n, err := s.LeftByCaller(); err == nil {
			byCaller = n
		}
	}
	t.endChildren()
	lost += t.endedLost
	// Its memory gone, and the process not: it ran another executable,
	// whose memory trace does not write to. The holder of -- CMD tells
	// (adopt); of -p, the process's executable does: a process whose
	// memory is gone has none while it exits, so one that has an
	// executable, and whose pidfd does not say that it exited (its pid
	// taken again), runs a new one, another file or the same again.
	// Short of that, that it lives on a second later.
	unheld := f.cmd == nil
	runs, alive := runsExe(pid, opt.exe)
	if exited && alive && (!runs || f.pidfd >= 0 && !readable(f.pidfd)) {
		t.execed = true
	}
	var at time.Time
	gone := false
	if unheld && !t.execed {
		at, gone = t.exit.exited(exited)
		t.execed = exited && !gone
	}
	if gone || t.execed {
		if counts == nil {
			counts = t.kept
		}
		lost = max(lost, t.keptLost)
		what, since := "the events it recorded since are lost", "the events it recorded since trace last read its ring are lost"
		if opt.Stats {
			what, since = "the calls it made since are not counted", "the calls it made since trace last read its ring are not counted"
		}
		switch {
		case t.execed:
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d ran another executable: its trace ends, and %s\n", pid, since)
		case counts != nil || !opt.Stats:
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d exited %v after trace last read its ring: %s\n", pid, at.Sub(t.keptAt).Round(time.Millisecond), what)
		}
	}
	switch {
	case t.sampling:
		// The calls the programs' sampling left out, counted.
		snap, calls := t.left.snapshot(t.sites, addCounts(t.left.sum(counts), t.ended))
		if opt.Counts != nil {
			opt.Counts(snap)
		}
		if opt.LeftOut != nil {
			opt.LeftOut(calls, byCaller+t.endedByCaller)
		}
	case counts != nil:
		t.final = addCounts(counts, t.ended)
		if opt.Counts != nil {
			opt.Counts(statSnapshot(t.sites, t.layout, t.final, lost, 0))
		}
	}
	switch {
	case !opt.Stats:
		finish()
	case t.final == nil && t.execed && f.cmd != nil:
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d ran another executable before trace read its counts\n", pid)
	case t.final == nil && t.execed:
		return fmt.Errorf("process %d ran another executable before trace read its counts", pid)
	case t.final == nil && unheld:
		if opt.Verbose {
			fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: process %d: its memory gone: %v, an executable: %v, the same file: %v, gone: %v\n", pid, exited, alive, runs, gone)
		}
		return fmt.Errorf("process %d exited before trace read its counts", pid)
	case t.final == nil:
		return fmt.Errorf("process %d: the counts were lost with its memory: it ended without stopping at its exit", pid)
	default:
		if err := sp.print(t.counts); err != nil {
			return err
		}
	}
	// Of Ps without a buffer: a GOMAXPROCS raised past the ring's room,
	// or between two polls.
	noSlot = min(noSlot, lost)
	if full := lost - noSlot; full > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: lost %d events: the in-process ring (%s per P) was full; -buffer makes it larger\n", full, SizeText(s.Size()))
	}
	if noSlot > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: lost %d events of Ps without a buffer in the ring: the program raised its GOMAXPROCS\n", noSlot)
	}
	if (readErr != nil && lapse || t.execed) && f.cmd != nil {
		// The command is trace's to wait for, and its status to return:
		// it goes on as it would untraced.
		if !t.execed {
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

// newStatPrinter returns what prints the trace's counts.
func (t *ringTrace) newStatPrinter() *statPrinter {
	return &statPrinter{opt: t.opt, sites: t.sites, layout: t.layout, w: bufio.NewWriter(t.opt.Stdout), prev: make([]uint64, t.layout.slots), since: time.Now()}
}
