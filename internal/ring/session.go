package ring

import (
	"bufio"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // monotonic

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/ringlayout"
	"github.com/go-usdt/usdt/internal/values"
)

// Lease is how long a tracer's word keeps the ring on: a tracer renews
// it more often than that (Renew), and a program whose tracer died (or
// stopped) turns its probes off by itself at the first fire after it.
const Lease = time.Second

// DefaultSize is each P's buffer unless the tracer is asked for
// another, for a program whose GOMAXPROCS is the machine's CPUs.
func DefaultSize() int { return SizeFor(runtime.NumCPU()) }

// SizeFor is the size of each buffer of a ring for a program of procs
// Ps (GOMAXPROCS): 32 MiB up to 4, less past them, so that DataMax has
// room for at least 8 and for twice as many: a program may raise its
// GOMAXPROCS while traced, and Grow gives its new Ps buffers.
func SizeFor(procs int) int {
	size := 32 << 20
	for size > 4096 && size*max(2*procs, 8) > ringlayout.DataMax {
		size /= 2
	}
	return size
}

// Address returns where the executable f has the ring, and its Where
// words, at link time; ok is false for a binary built without it (by an
// older usdt-toolexec, or for an architecture without it), or with a
// ring of another layout (Stale). The ring is found by its symbol where
// f has one, and its layout by Where, which a binary stripped of its
// symbols is searched for alone.
func Address(f *elf.File) (addr, where uint64, ok bool) {
	var sym uint64
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == ringlayout.Symbol && s.Size >= ringlayout.Size {
			sym = s.Value
		}
	}
	findMagicAt(f, ringlayout.WhereMagic, func(b []byte, i int, secAddr uint64) bool {
		where = secAddr + uint64(i)
		if sym != 0 {
			// The layout is this tracer's. The address beside the
			// magic may be 0 in the file: a position-independent
			// executable of a RELA architecture (arm64) keeps it in
			// the dynamic relocation.
			addr, ok = sym, true
			return ok
		}
		// The link-time address, which Go's linker and an external one
		// write into a position-independent executable on amd64.
		if i+16 <= len(b) {
			if at := binary.LittleEndian.Uint64(b[i+8:]); inBSS(f, at) {
				addr, ok = at, true
			}
		}
		return ok
	})
	return addr, where, ok
}

// Stale reports whether f has a ring of an older layout than this
// tracer writes: it was built by an older usdt-toolexec.
func Stale(f *elf.File) bool {
	var found bool
	for _, magic := range []uint64{whereMagic1, whereMagic2} {
		findMagic(f, magic, func([]byte, int) bool {
			found = true
			return true
		})
	}
	return found
}

// findMagic calls found with the bytes of each allocated section of data
// and each 8-aligned offset in them of the word magic, until found
// returns true; at is set to the address of the section's start.
func findMagic(f *elf.File, magic uint64, found func(b []byte, at int) bool) {
	findMagicAt(f, magic, func(b []byte, i int, _ uint64) bool { return found(b, i) })
}

// findMagicAt is findMagic, with the section's address.
func findMagicAt(f *elf.File, magic uint64, found func(b []byte, at int, addr uint64) bool) {
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_ALLOC == 0 || sec.Flags&elf.SHF_EXECINSTR != 0 {
			continue
		}
		b, err := sec.Data()
		if err != nil {
			continue
		}
		for i := 0; i+8 <= len(b); i += 8 {
			if binary.LittleEndian.Uint64(b[i:]) == magic && found(b, i, sec.Addr) {
				return
			}
		}
	}
}

// inBSS reports whether the ring's Size bytes at addr lie in a
// zero-filled section of f, as the ring's do.
func inBSS(f *elf.File, addr uint64) bool {
	for _, sec := range f.Sections {
		if sec.Type == elf.SHT_NOBITS && sec.Flags&elf.SHF_ALLOC != 0 && addr >= sec.Addr && addr-sec.Addr+ringlayout.Size <= sec.Size {
			return true
		}
	}
	return false
}

// Record is one event as a probe wrote it.
type Record struct {
	Site      uint64 // the site's address in the process
	Goroutine uint64
	Time      int64  // runtime.nanotime: CLOCK_MONOTONIC
	Thread    uint32 // the thread's id
	Words     []uint64
	// Strings holds, for each word that points to a C string, its bytes
	// as the probe copied them; nil for the other words.
	Strings [][]byte
	// Area is the value area the site's reads filled (Plan), nil for a
	// site without.
	Area []byte
	// AfterLoss is set on the first record of each goroutine after a P
	// dropped events: which goroutines lost theirs the ring does not
	// know, so each of them may have.
	AfterLoss bool
	// CallerTime says that Time is the trampoline's reading that timed
	// the call (CallerTimeBit).
	CallerTime bool
	// Compact says that the record is of a call that sampling left out
	// (Sample): its one word is the exit's elapsed ns, with
	// ringlayout.CompactError and CompactFailed, and it has no area.
	Compact bool
}

// Session is a ring trace of one process.
type Session struct {
	pid   int
	mem   *os.File
	ctl   uint64 // the ring's address in the process
	where uint64 // its Where words' address in the process
	slots int
	size  uint64
	// mu guards list: the tracer renews the lease (Renew) on a
	// goroutine of its own while it stops the session.
	mu sync.Mutex
	// list is the ring's list of the semaphores this session turned
	// on (ListAt), as it wrote it.
	list []uint64
	// token is this session's in the ring's OwnerAt.
	token uint64
	tails []uint64
	// dropped is what Take last read of each P's count of dropped
	// events and, last, of NoSlotAt; taken, the time it read them.
	dropped []uint64
	taken   int64
	// With Count: where the counters are, relative to the ring, how
	// many bytes each P has, and how many counters.
	counters, countersSize uint64
	nCounters              int
	// countsLeftOut says that the counters are CountLeftOut's, past the
	// buffers.
	countsLeftOut bool
	// countBuf is where Counters reads, a chunk at a time.
	countMu  sync.Mutex
	countBuf []byte
	// areas holds the bytes of the value area of each site (address in
	// the process) that has value reads.
	areas map[uint64]int
	// tickNs is the ns of 1<<32 ticks while the writers time calls by
	// the time-stamp counter, else 0; ticks turns the records' times
	// into ns.
	tickNs atomic.Uint64
	ticks  tickClock
	// losses marks the records Deliver hands on that may follow dropped
	// events.
	losses losses
}

// Open takes the ring of process pid, whose executable has it at ctl,
// and its Where words at where, both plus the load bias, for a trace with
// slots buffers of size bytes (a power of two). It fails when the process
// may not be traced by this user, naming why, when another tracer
// records through the ring, and when the process's memory does not hold
// the Where words there: it does not run that executable (it ran another
// since the tracer read it), and Open writes nothing. The session's
// reads and writes of the ring then go through the memory of the process
// as Open found it: after an exec, or its exit, they fail (ErrExited).
func Open(pid int, ctl, where uint64, slots, size int) (*Session, error) {
	if slots < 1 || slots > ringlayout.MaxSlots || size < 4096 || size&(size-1) != 0 || slots*size > ringlayout.DataMax {
		return nil, fmt.Errorf("a ring of %d buffers of %d bytes does not fit: %d buffers of at most %d bytes in all, each a power of two", slots, size, ringlayout.MaxSlots, ringlayout.DataMax)
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		return nil, accessError(pid, err)
	}
	s := &Session{pid: pid, mem: mem, ctl: ctl, where: where, slots: slots, size: uint64(size), tails: make([]uint64, slots), dropped: make([]uint64, slots+1), taken: monotonic(), token: rand.Uint64() | 1}
	if err := s.Same(); err != nil {
		mem.Close()
		return nil, err
	}
	busy, err := s.busy()
	if err == nil && busy {
		busy, err = s.takeOver()
	}
	if err != nil {
		mem.Close()
		return nil, err
	}
	if busy {
		mem.Close()
		return nil, fmt.Errorf("process %d: another tracer records through its ring", pid)
	}
	// Every P's header, for those Grow may add, each with a seed of its
	// random numbers for sampling.
	hdrs := make([]byte, ringlayout.MaxSlots*ringlayout.HeaderSize)
	for i := range ringlayout.MaxSlots {
		binary.LittleEndian.PutUint64(hdrs[i*ringlayout.HeaderSize+ringlayout.RandAt:], rand.Uint64()|1)
	}
	// A new epoch: the goroutines' slots that an earlier session left
	// are empty to this one's writers.
	epoch, err := s.word(ringlayout.EpochAt)
	if err != nil {
		mem.Close()
		return nil, err
	}
	epoch = (epoch>>ringlayout.GoEpochShift + 1) & (1<<(64-ringlayout.GoEpochShift) - 1)
	epoch = max(epoch, 1)
	err = errors.Join(
		s.setWord(ringlayout.SamplingAt, 0),
		s.setWord(ringlayout.CompactAt, 0),
		s.setWord(ringlayout.CountLeftAt, 0),
		s.setWord(ringlayout.EpochAt, epoch<<ringlayout.GoEpochShift),
		s.write(ringlayout.HeadersAt, hdrs),
		s.setWord(ringlayout.SlotsAt, uint64(slots)),
		s.setWord(ringlayout.SizeAt, uint64(size)),
		s.setWord(ringlayout.NoSlotAt, 0),
		s.setWord(ringlayout.ListLenAt, 0),
		s.setWord(ringlayout.ModeAt, ringlayout.Events),
		s.setWord(ringlayout.PlansAt, 0),
		s.setWord(ringlayout.EntryTicksAt, 0),
		s.setWord(ringlayout.PidAt, uint64(innerPid(pid))),
		s.setWord(ringlayout.ClockAt, ringlayout.Monotonic),
		s.setWord(ringlayout.BlockAt, 0),
		s.Renew(),
		s.setWord(ringlayout.OwnerAt, s.token),
		s.setWord(ringlayout.OnAt, ringlayout.Preparing),
	)
	if err != nil {
		mem.Close()
		return nil, err
	}
	return s, nil
}

// Same checks that the session's process still has the memory Open
// found: that it has neither exited nor run another executable. It
// reads the Where words through the process's memory as Open opened it,
// which an exec or an exit takes away.
func (s *Session) Same() error {
	var b [16]byte
	if err := s.read(s.where, b[:]); err != nil {
		return err
	}
	// The magic, with the layout's version, where the executable has
	// it. (The address beside it is the ring's link-time one in a
	// position-independent executable, which is not relocated.)
	if magic := binary.LittleEndian.Uint64(b[:]); magic != ringlayout.WhereMagic {
		return fmt.Errorf("process %d does not have this executable's ring where the executable has it (%#x): it runs another executable", s.pid, s.ctl)
	}
	return nil
}

// InUse reports whether a tracer records through the ring of process
// pid, which is at ctl in its memory: whether Open would refuse it.
func InUse(pid int, ctl uint64) (bool, error) {
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return false, accessError(pid, err)
	}
	defer mem.Close()
	s := &Session{pid: pid, mem: mem, ctl: ctl}
	busy, err := s.busy()
	if err != nil || !busy {
		return busy, err
	}
	// A ring on past its tracer's lease is one that Open takes over.
	on, err := s.word(ringlayout.OnAt)
	if err != nil || on != ringlayout.Recording {
		return true, err
	}
	stale, err := s.leaseRunOut()
	return !stale, err
}

// SitePlan is a site whose events carry the Go values that its reads copy
// when it fires.
type SitePlan struct {
	Addr uint64 // in the process
	Ops  []values.Op
	// Role is the site's role for sampling (Sample): ringlayout's
	// FlagEntry or FlagExit, and the words of its error result and of
	// its incoming trace context, above ringlayout.PlanFlagsShift's
	// bit. A site with a role is in the table without value reads too.
	Role uint16
}

// Plan has the program copy these sites' values into their events, as
// the BPF transport's program does. Call it before Enable.
func (s *Session) Plan(plans []SitePlan) error {
	if len(plans) == 0 {
		return nil
	}
	table, mask := newTable(len(plans))
	var reads []byte
	readsAt := uint64(ringlayout.DataAt + len(table))
	shared := map[string]uint64{}
	s.areas = make(map[uint64]int, len(plans))
	for _, p := range plans {
		enc := make([]byte, ringlayout.OpSize*(len(p.Ops)+1))
		area := 0
		flush := flushes(p.Ops)
		for i, op := range p.Ops {
			o := enc[ringlayout.OpSize*i:]
			o[ringlayout.OpFrom], o[ringlayout.OpArg] = byte(op.From), op.Arg
			binary.LittleEndian.PutUint16(o[ringlayout.OpSrc:], op.Src)
			binary.LittleEndian.PutUint16(o[ringlayout.OpDst:], op.Dst)
			binary.LittleEndian.PutUint16(o[ringlayout.OpMax:], op.Max)
			binary.LittleEndian.PutUint16(o[ringlayout.OpElem:], op.Elem)
			if op.Guess {
				o[ringlayout.OpGuess] = 1
			}
			if op.Held {
				o[ringlayout.OpHeld] = 1
			}
			if flush[i] {
				o[ringlayout.OpFlush] = 1
			}
			area = max(area, int(op.Dst)+int(op.Max))
		}
		area = (area + 7) &^ 7
		role := uint64(p.Role) << ringlayout.PlanFlagsShift
		if area == 0 || area > ringlayout.AreaMax {
			if role != 0 {
				table.put(p.Addr, mask, role)
			}
			continue
		}
		at, ok := shared[string(enc)]
		if !ok {
			at = readsAt + uint64(len(reads))
			shared[string(enc)] = at
			reads = append(reads, enc...)
		}
		table.put(p.Addr, mask, at|uint64(area)<<32|role)
		s.areas[p.Addr] = area
	}
	if readsAt+uint64(len(reads)) > ringlayout.BatchAt {
		return fmt.Errorf("the value reads of %d sites take %d bytes, more than the ring's %d: trace fewer functions, or -transport bpf", len(plans), len(table)+len(reads), ringlayout.BatchAt-ringlayout.DataAt)
	}
	return errors.Join(
		s.write(ringlayout.DataAt, table),
		s.write(readsAt, reads),
		s.setWord(ringlayout.TableMaskAt, mask),
		s.setWord(ringlayout.PlansAt, 1),
	)
}

// Sample has the program sample its calls (ringlayout.SamplingAt), for a
// session of events whose Plan gave every site its role: a root call is
// sampled at rate (from 0 to 1) unless its incoming trace context says,
// and the calls under it follow it. A call left out writes nothing, or,
// with compact, a compact record at its exit (Record.Compact), for a
// tracer that counts every call. Call it before Enable.
func (s *Session) Sample(rate float64, compact bool) error {
	if rate < 0 || rate > 1 {
		return fmt.Errorf("a sampling rate of %v: want from 0 to 1", rate)
	}
	threshold := uint64(math.MaxUint64)
	if v := rate * (1 << 64); v < 1<<64 {
		threshold = uint64(v)
	}
	c := uint64(0)
	if compact {
		c = 1
	}
	return errors.Join(
		s.setWord(ringlayout.SampleAt, threshold),
		s.setWord(ringlayout.CompactAt, c),
		s.setWord(ringlayout.SamplingAt, 1),
	)
}

// TimeByTicks has the writers of a session of events time calls by the
// time-stamp counter, where it counts at one rate on every CPU: the
// records' times come out of Take in runtime.nanotime's ns all the same.
// A call is timed at its entry and twice at its exit: by
// runtime.nanotime, those reads were a fifth of a sampled server's time
// on a VM. Call it after Block and before Enable; it does nothing where
// the counter will not do.
func (s *Session) TimeByTicks() error {
	if !stableTicks() {
		return nil
	}
	return errors.Join(s.timeByTicks(), s.Renew())
}

// MaxBlock bounds Block's wait: a writer that waits keeps its P, and a
// stop of the world (a garbage collection's) waits for it.
const MaxBlock = 10 * time.Second

// Block has a writer whose buffer is full wait up to d for the tracer
// to make room before it drops its event (ringlayout.BlockAt); 0, as
// Open leaves it, drops at once. It is for a session of events; call it
// before TimeByTicks, which turns d into ticks where the writers then
// time calls by them.
func (s *Session) Block(d time.Duration) error {
	if d < 0 || d > MaxBlock {
		return fmt.Errorf("a wait for room of %v: want from 0 to %v", d, MaxBlock)
	}
	return s.setWord(ringlayout.BlockAt, uint64(d.Nanoseconds()))
}

// table is the writers' table of sites (see TableMaskAt): entries of two
// words, found by open addressing from the site's address / 8.
type table []byte

// newTable makes a table for n sites, at most half full.
func newTable(n int) (table, uint64) {
	entries := 1
	for entries < 2*n {
		entries *= 2
	}
	return make(table, 16*entries), uint64(entries - 1)
}

func (t table) put(addr, mask, v uint64) {
	i := addr >> 3 & mask
	for binary.LittleEndian.Uint64(t[16*i:]) != 0 {
		i = (i + 1) & mask
	}
	binary.LittleEndian.PutUint64(t[16*i:], addr)
	binary.LittleEndian.PutUint64(t[16*i+8:], v)
}

// Site is a site the program counts the calls of, in Counts mode.
type Site struct {
	Addr  uint64 // in the process
	First int    // its first counter
	Timed bool   // it adds its elapsed time, in 1 + HistBuckets counters
}

// countTable is the writers' table of sites to count (see
// ringlayout.TableMaskAt): each entry's first counter times two, plus one
// for a timed site.
func countTable(sites []Site) (table, uint64) {
	table, mask := newTable(len(sites))
	for _, site := range sites {
		v := uint64(site.First) << 1
		if site.Timed {
			v |= 1
		}
		table.put(site.Addr, mask, v)
	}
	return table, mask
}

// Count has the program count the calls of sites in counters of its own,
// one set of n per P, instead of writing records: Counters sums them.
// atExits says that no site is the entry of a function with an exit
// probe, whose calls the exit counts. Call it before Enable.
func (s *Session) Count(sites []Site, n int, atExits bool) error {
	table, mask := countTable(sites)
	counters := (ringlayout.DataAt + uint64(len(table)) + 63) &^ 63
	size := uint64(8*n+63) &^ 63
	if counters+uint64(s.slots)*size > ringlayout.Size {
		return fmt.Errorf("counting %d sites in %d counters for each of %d Ps takes %d bytes, more than the ring's %d", len(sites), n, s.slots, counters+uint64(s.slots)*size-ringlayout.DataAt, ringlayout.Size-ringlayout.DataAt)
	}
	s.counters, s.countersSize, s.nCounters = counters, size, n
	err := errors.Join(
		s.write(ringlayout.DataAt, table),
		s.write(counters, make([]byte, uint64(s.slots)*size)),
		s.setWord(ringlayout.TableMaskAt, mask),
		s.setWord(ringlayout.CountersAt, counters),
		s.setWord(ringlayout.CountersSizeAt, size),
		s.setWord(ringlayout.ModeAt, ringlayout.Counts),
	)
	if err == nil {
		err = s.TimeByTicks()
	}
	if err == nil && atExits && s.tickNs.Load() != 0 {
		err = s.setWord(ringlayout.EntryTicksAt, 1)
	}
	return err
}

// timeByTicks has the writers time calls by the time-stamp counter
// (ringlayout.Ticks) instead of runtime.nanotime: a third of its cost
// where that is a VM's kvm-clock, and a call is timed two or three
// times. The ticks go into the records' times too, which Take turns
// into runtime.nanotime's ns (tickClock). A bound on a wait for room
// (Block) goes into ticks, and the lease too, last: a writer compares
// it with the clock ClockAt says. The caller renews the lease after it.
func (s *Session) timeByTicks() error {
	tickNs, from, to := calibrate(10 * time.Millisecond)
	s.ticks.start(tickNs, from, to)
	block, err := s.word(ringlayout.BlockAt)
	if err != nil {
		return err
	}
	if block != 0 {
		err = s.setWord(ringlayout.BlockAt, uint64(float64(block)*(1<<32)/float64(tickNs)))
	}
	err = errors.Join(err, s.setWord(ringlayout.TickNsAt, tickNs), s.setWord(ringlayout.ClockAt, ringlayout.Ticks))
	s.tickNs.Store(tickNs)
	return err
}

// CountLeftOut has the program count the calls that its sampling
// (Sample) leaves out, as Count counts, in n counters of its own for each
// P, placed past the Ps' buffers: Counters sums them. A timed site whose
// role names an error result has its errors counted after its buckets.
// It fails, writing nothing, where the buffers leave no room for them:
// the program then writes compact records instead (Sample's compact).
// Call it before Enable.
func (s *Session) CountLeftOut(sites []Site, n int) error {
	table, mask := countTable(sites)
	tableAt := uint64(ringlayout.BuffersAt) + uint64(s.slots)*s.size
	counters := (tableAt + uint64(len(table)) + 63) &^ 63
	size := uint64(8*n+63) &^ 63
	if end := counters + uint64(s.slots)*size; end > ringlayout.BuffersAt+ringlayout.DataMax {
		return fmt.Errorf("counting %d sites in %d counters for each of %d Ps takes %d bytes more than the ring has past its buffers", len(sites), n, s.slots, end-ringlayout.BuffersAt-ringlayout.DataMax)
	}
	s.counters, s.countersSize, s.nCounters, s.countsLeftOut = counters, size, n, true
	return errors.Join(
		s.write(tableAt, table),
		s.write(counters, make([]byte, uint64(s.slots)*size)),
		s.setWord(ringlayout.CountTableAt, tableAt),
		s.setWord(ringlayout.CountMaskAt, mask),
		s.setWord(ringlayout.CountersAt, counters),
		s.setWord(ringlayout.CountersSizeAt, size),
		s.setWord(ringlayout.CountLeftAt, 1),
	)
}

// LeftByCaller is how many calls the program's sampling left out because
// their root's incoming trace context was not sampled, of those it
// counted (CountLeftOut): 0 where it writes compact records instead,
// each of which says so itself.
func (s *Session) LeftByCaller() (uint64, error) {
	if !s.countsLeftOut {
		return 0, nil
	}
	var n uint64
	var err error
	for i := range s.slots {
		l, lerr := s.word(ringlayout.HeadersAt + uint64(i*ringlayout.HeaderSize) + ringlayout.LeftCallerAt)
		n += l
		err = errors.Join(err, lerr)
	}
	return n, err
}

// Clock says which clock the writers time calls by.
func (s *Session) Clock() string {
	if s.tickNs.Load() != 0 {
		return "the time-stamp counter"
	}
	return "runtime.nanotime"
}

// Counters returns the counters of Count, summed over the Ps. It reads
// them a chunk at a time into a buffer it keeps: Caddy's every function
// has 100 MB of counters, which a buffer made for each read cleared and
// faulted in again, most of the 11 s trace took to end on Caddy.
func (s *Session) Counters() ([]uint64, error) { return s.CountersInto(nil) }

// CountersInto is Counters, summed into sum's array where it has room
// for them: a trace that reads them every second reuses one, where a new
// one each time (Caddy's every function: 100 MB) kept the garbage
// collector and its scavenger busy. What sum held is overwritten, also
// where the read fails.
func (s *Session) CountersInto(sum []uint64) ([]uint64, error) {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	chunk := min(8*s.nCounters, countChunk)
	if len(s.countBuf) < chunk {
		s.countBuf = make([]byte, chunk)
	}
	if cap(sum) < s.nCounters {
		sum = make([]uint64, s.nCounters)
	}
	sum = sum[:s.nCounters]
	clear(sum)
	if err := sumCounters(s.read, s.ctl+s.counters, s.countersSize, s.slots, s.countBuf[:chunk], sum); err != nil {
		return nil, err
	}
	return sum, nil
}

// sumCounters adds the len(sum) counters of each of slots Ps, the first
// at base, each P's size bytes after the last's, to sum, reading them
// with read into buf, a chunk at a time.
func sumCounters(read func(addr uint64, b []byte) error, base, size uint64, slots int, buf []byte, sum []uint64) error {
	n := len(sum)
	per := max(1, len(buf)/8)
	for p := range uint64(slots) {
		for i := 0; i < n; i += per {
			b := buf[:8*min(per, n-i)]
			if err := read(base+p*size+8*uint64(i), b); err != nil {
				return err
			}
			for k := range len(b) / 8 {
				sum[i+k] += binary.LittleEndian.Uint64(b[8*k:])
			}
		}
	}
	return nil
}

// countChunk bounds the buffer Counters reads into.
const countChunk = 4 << 20

// Renew extends the lease. An error says that the program turned the
// ring off itself: the lease had run out, or Stop turned it off. It may
// run on another goroutine than the session's other methods.
func (s *Session) Renew() error { return s.Extend(Lease) }

// Extend has the lease run out d from now, as Renew does Lease from now.
func (s *Session) Extend(d time.Duration) error {
	s.mu.Lock()
	enabled := len(s.list) > 0
	s.mu.Unlock()
	if enabled {
		on, err := s.word(ringlayout.OnAt)
		if err == nil && on == ringlayout.Recording {
			var owner uint64
			if owner, err = s.word(ringlayout.OwnerAt); err == nil && owner != s.token {
				return fmt.Errorf("process %d: another tracer took its ring over: this tracer did not renew its lease within %v", s.pid, Lease)
			}
		}
		if err != nil || on != ringlayout.Recording {
			return errors.Join(err, fmt.Errorf("process %d turned its probes off: this tracer did not renew its lease within %v", s.pid, Lease))
		}
	}
	return s.until(d)
}

// until has the lease run out d from now.
func (s *Session) until(d time.Duration) error {
	if tickNs := s.tickNs.Load(); tickNs != 0 {
		return s.setWord(ringlayout.UntilAt, (readTicks()+uint64(float64(d.Nanoseconds())*(1<<32)/float64(tickNs)))|ringlayout.TicksTag)
	}
	return s.setWord(ringlayout.UntilAt, uint64(monotonic()+d.Nanoseconds()))
}

// Pid is the process the session traces.
func (s *Session) Pid() int { return s.pid }

// Keep renews the lease every quarter of it until stop is called, from
// Open until the caller's own renewals begin: writing the value plans
// and turning a large program's probes on take about half a second
// (Caddy's 120,408), and a probe that another tracer enabled meanwhile
// would find the lease run out and turn the ring off. Unlike Renew it
// neither waits for Enable nor checks that the ring is on.
func (s *Session) Keep() (stop func()) {
	_, end := Renewing(func() error {
		s.until(Lease)
		return nil
	})
	return func() { end() }
}

// Renewing calls renew every quarter of the lease until stop is called
// or renew fails: failed is closed then, and stop returns the failure.
func Renewing(renew func() error) (failed <-chan struct{}, stop func() error) {
	fail, done, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var err error
	go func() {
		defer close(finished)
		t := time.NewTicker(Lease / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err = renew(); err != nil {
					close(fail)
					return
				}
			}
		}
	}()
	return fail, sync.OnceValue(func() error {
		close(done)
		<-finished
		return err
	})
}

// Close ends the session; Stop first.
func (s *Session) Close() error { return s.mem.Close() }

// Slots is how many of the program's Ps have a buffer, or counters.
func (s *Session) Slots() int { return s.slots }

// Size is the bytes of each P's buffer.
func (s *Session) Size() int { return int(s.size) }

// Grow gives the Ps up to procs that have no buffer (or counters, after
// Count) one each, as far as the ring has room: a program that raised
// its GOMAXPROCS while traced. It returns how many Ps have one now. A
// writer on a P past them drops its event and counts it (NoSlot), until
// the ring's count of slots, written last, takes it in: the new Ps'
// headers are zero since Open, their counters zeroed before.
func (s *Session) Grow(procs int) (int, error) {
	room := ringlayout.DataMax / int(s.size)
	switch {
	case s.countsLeftOut:
		// The counters are past the buffers: no room for more.
		room = s.slots
	case s.countersSize != 0:
		room = int((ringlayout.Size - s.counters) / s.countersSize)
	}
	n := min(procs, room, ringlayout.MaxSlots)
	if n <= s.slots {
		return s.slots, nil
	}
	if s.countersSize != 0 {
		at := s.counters + uint64(s.slots)*s.countersSize
		if err := s.write(at, make([]byte, uint64(n-s.slots)*s.countersSize)); err != nil {
			return s.slots, err
		}
	}
	if err := s.setWord(ringlayout.SlotsAt, uint64(n)); err != nil {
		return s.slots, err
	}
	noSlot := s.dropped[s.slots]
	s.tails = append(s.tails, make([]uint64, n-s.slots)...)
	s.dropped = append(s.dropped[:s.slots], make([]uint64, n-s.slots+1)...)
	s.dropped[n] = noSlot
	s.slots = n
	return n, nil
}

// Uint32 reads the 4 bytes at addr, an address in the process, through
// the memory Open took.
func (s *Session) Uint32(addr uint64) (uint32, error) {
	var b [4]byte
	if err := s.read(addr, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// NoSlot returns the events dropped so far because their P had no
// buffer: GOMAXPROCS raised past the ring's room, or not yet grown to.
func (s *Session) NoSlot() (uint64, error) { return s.word(ringlayout.NoSlotAt) }

// Lost returns the events dropped so far: buffers full, or Ps without
// one (GOMAXPROCS raised past the slots).
func (s *Session) Lost() (uint64, error) {
	n, err := s.word(ringlayout.NoSlotAt)
	for i := range s.slots {
		l, lerr := s.word(ringlayout.HeadersAt + uint64(i*ringlayout.HeaderSize) + ringlayout.LostAt)
		n += l
		err = errors.Join(err, lerr)
	}
	return n, err
}

// TakeMax bounds the bytes of records one Take copies out of the ring,
// shared by the Ps (each has at least minShare): with the backlog of
// records not yet printed, it bounds the tracer's memory whatever the
// program writes.
const TakeMax = 32 << 20

// takeLimit is TakeMax, and minShare a P's share of it at least:
// hundreds of the largest records (their C strings and value areas are
// bounded). Tests make both smaller.
var takeLimit, minShare = TakeMax, 1 << 20

// HoldBack is how long a record stays in its buffer before Take takes it:
// a record is published some time after it read the clock, so one older
// than another Take took may still come. Deliver hands records on
// in the order of their times, across the Ps: a goroutine that moves to
// another P writes its next events there.
const HoldBack = 5 * time.Millisecond

// Batch is records Take copied out of the ring, in the order of their
// times, for Deliver.
type Batch struct {
	buf  []byte
	recs []placed
	// loss, when its to is not 0, is when the events were dropped
	// that Take saw counted, of any goroutine.
	loss lossSpan
}

// placed is where a record is in a Batch's bytes.
type placed struct {
	time     int64
	p        int
	at, size int
}

// Bytes is how much of the tracer's memory the batch holds.
func (b *Batch) Bytes() int { return len(b.buf) }

// Len is how many records the batch holds.
func (b *Batch) Len() int { return len(b.recs) }

// Take copies the records written since the last Take out of the ring
// and frees their room: every record unless final is false, then those
// older than HoldBack. busy says that a buffer was more than a quarter
// full: the reader should not wait before it takes again. The writers
// have the room while the reader decodes, which takes far longer than
// the copy (a record with large Go values: 10 µs to decode, written in
// 4). The batch is nil when there is nothing to hand on. Batches go to
// Deliver in the order Take returned them.
func (s *Session) Take(final bool) (b *Batch, busy bool, err error) {
	return s.TakeUpTo(final, takeLimit)
}

// TakeUpTo is Take of at most limit bytes of records (TakeMax at most,
// each P's share of it a MiB at least), for a reader that frees the ring's room a little
// at a time, as fast as it hands the records on: one whose writers wait
// for room (Block).
func (s *Session) TakeUpTo(final bool, limit int) (b *Batch, busy bool, err error) {
	now := monotonic()
	until := int64(math.MaxInt64)
	if !final {
		until = now - HoldBack.Nanoseconds()
	}
	if s.tickNs.Load() != 0 {
		if k, ok := s.ticks.rerate(); ok {
			if err := s.setWord(ringlayout.TickNsAt, k); err != nil {
				return nil, busy, err
			}
			s.tickNs.Store(k)
		}
	}
	ticks := s.ticks.segments()
	hdrs := make([]byte, s.slots*ringlayout.HeaderSize)
	if err := s.read(s.ctl+ringlayout.HeadersAt, hdrs); err != nil {
		return nil, busy, err
	}
	noSlot, err := s.word(ringlayout.NoSlotAt)
	if err != nil {
		return nil, busy, err
	}
	// A drop counted since the last Take read the counts was of an
	// event that read the clock after that and before these were read,
	// give or take the few instructions between a writer's clock and
	// its count.
	var loss lossSpan
	for i := range s.slots + 1 {
		n := noSlot
		if i < s.slots {
			n = binary.LittleEndian.Uint64(hdrs[i*ringlayout.HeaderSize+ringlayout.LostAt:])
		}
		if n != s.dropped[i] {
			s.dropped[i] = n
			loss = lossSpan{s.taken - time.Millisecond.Nanoseconds(), now + time.Millisecond.Nanoseconds()}
		}
	}
	s.taken = now
	// Each P's unread bytes, up to its share of TakeMax: a P whose
	// share ends before its head is taken up to its last whole record
	// within it, and every P's records up to that record's time, so
	// that the batch keeps their order; the rest waits for the next
	// Take, which busy says to make at once.
	heads := make([]uint64, s.slots)
	share := uint64(max(min(limit, takeLimit)/s.slots, minShare))
	total := uint64(0)
	for i := range s.slots {
		head := binary.LittleEndian.Uint64(hdrs[i*ringlayout.HeaderSize+ringlayout.HeadAt:])
		tail := s.tails[i]
		if head-tail > s.size || head < tail {
			return nil, busy, fmt.Errorf("process %d: the ring of P %d is damaged (head %d, tail %d)", s.pid, i, head, tail)
		}
		heads[i] = head
		busy = busy || head-tail > s.size/4
		if head-tail > share {
			heads[i], busy = tail+share, true
		}
		total += heads[i] - tail
	}
	if total == 0 {
		if loss.to != 0 {
			// For Deliver to mark the next records.
			return &Batch{loss: loss}, busy, nil
		}
		return nil, busy, nil
	}
	// Each P's bytes, back to back.
	b = &Batch{buf: make([]byte, total), loss: loss}
	starts := make([]int, s.slots+1)
	at := 0
	for i := range s.slots {
		starts[i] = at
		n := heads[i] - s.tails[i]
		if n == 0 {
			continue
		}
		buf := b.buf[at : at+int(n)]
		base := s.ctl + ringlayout.BuffersAt + uint64(i)*s.size
		off := s.tails[i] & (s.size - 1)
		first := min(n, s.size-off)
		if err := s.read(base+off, buf[:first]); err != nil {
			return nil, busy, err
		}
		if first < n {
			if err := s.read(base, buf[first:]); err != nil {
				return nil, busy, err
			}
		}
		at += int(n)
	}
	starts[s.slots] = at
	// Then every record's place, up to the time of the last whole record
	// of each P cut at its share (a share holds hundreds of records).
	var rec Record
	for i := range s.slots {
		if heads[i] == binary.LittleEndian.Uint64(hdrs[i*ringlayout.HeaderSize+ringlayout.HeadAt:]) {
			continue
		}
		last := int64(math.MinInt64)
		for k, buf := 0, b.buf[starts[i]:starts[i+1]]; k < len(buf); {
			size, ok := parse(buf[k:], &rec, s.areas)
			if !ok {
				break
			}
			last, k = ticks.mono(rec.Time), k+size
		}
		if last == math.MinInt64 {
			return nil, busy, fmt.Errorf("process %d: the ring of P %d is damaged (no whole record in %d bytes)", s.pid, i, share)
		}
		until = min(until, last)
	}
	for i := range s.slots {
		buf := b.buf[starts[i]:starts[i+1]]
		cut := heads[i] != binary.LittleEndian.Uint64(hdrs[i*ringlayout.HeaderSize+ringlayout.HeadAt:])
		for k := 0; k < len(buf); {
			size, ok := parse(buf[k:], &rec, s.areas)
			if !ok && cut {
				break // the rest of the P's records, next time
			}
			if !ok {
				return nil, busy, fmt.Errorf("process %d: a record of P %d runs past its head", s.pid, i)
			}
			t := ticks.mono(rec.Time)
			if t > until {
				break // and the P's later ones
			}
			b.recs = append(b.recs, placed{t, i, starts[i] + k, size})
			k += size
		}
	}
	// Each P's tail moves past its last record to hand on.
	done := make([]uint64, s.slots)
	for _, r := range b.recs {
		done[r.p] = uint64(r.at + r.size - starts[r.p])
	}
	for i := range s.slots {
		if done[i] == 0 {
			continue
		}
		s.tails[i] += done[i]
		if err := s.setWord(ringlayout.HeadersAt+uint64(i*ringlayout.HeaderSize)+ringlayout.TailAt, s.tails[i]); err != nil {
			return nil, busy, err
		}
	}
	slices.SortStableFunc(b.recs, func(x, y placed) int { return cmp.Compare(x.time, y.time) })
	return b, busy, nil
}

// Deliver calls fn with the batch's records, in the order of their
// times; the Record and its Words are reused. It reads nothing of the
// process, which may be gone.
func (s *Session) Deliver(b *Batch, fn func(*Record)) {
	var rec Record
	if b.loss.to != 0 {
		s.losses.add(b.loss)
	}
	for _, r := range b.recs {
		parse(b.buf[r.at:r.at+r.size], &rec, s.areas)
		rec.Time = r.time
		rec.AfterLoss = s.losses.after(rec.Goroutine, rec.Time, rec.AfterLoss)
		fn(&rec)
	}
}

// parse reads the record at the start of buf into rec, and returns its
// size; ok is false when buf ends before it does. areas holds the bytes
// of each site's value area.
func parse(buf []byte, rec *Record, areas map[uint64]int) (size int, ok bool) {
	if len(buf) < 8*ringlayout.RecordWords {
		return 0, false
	}
	w0 := binary.LittleEndian.Uint64(buf)
	count := int(w0 >> ringlayout.CountShift & 0xf)
	strs := w0 >> ringlayout.StringsShift
	size = 8 * (ringlayout.RecordWords + count)
	if size > len(buf) {
		return 0, false
	}
	rec.Site = w0 & (1<<ringlayout.CountShift - 1)
	rec.Goroutine = binary.LittleEndian.Uint64(buf[8:])
	rec.Time = int64(binary.LittleEndian.Uint64(buf[16:]))
	thread := binary.LittleEndian.Uint64(buf[24:])
	rec.Thread, rec.AfterLoss, rec.CallerTime = uint32(thread), thread>>ringlayout.AfterLossBit&1 != 0, thread>>ringlayout.CallerTimeBit&1 != 0
	rec.Compact = thread>>ringlayout.CompactBit&1 != 0
	rec.Words = rec.Words[:0]
	rec.Strings = rec.Strings[:0]
	for k := range count {
		rec.Words = append(rec.Words, binary.LittleEndian.Uint64(buf[8*(ringlayout.RecordWords+k):]))
		rec.Strings = append(rec.Strings, nil)
	}
	for k := range count {
		if strs&(1<<k) == 0 {
			continue
		}
		if size+8 > len(buf) {
			return 0, false
		}
		n := binary.LittleEndian.Uint64(buf[size:])
		end := size + 8 + int((n+7)&^7)
		if n > uint64(len(buf)) || end > len(buf) {
			return 0, false
		}
		rec.Strings[k] = buf[size+8 : size+8+int(n)]
		size = end
	}
	rec.Area = nil
	if n := areas[rec.Site]; n > 0 && !rec.Compact {
		if size+n > len(buf) {
			return 0, false
		}
		rec.Area = buf[size : size+n]
		size += n
	}
	return size, true
}

func (s *Session) word(off uint64) (uint64, error) {
	var b [8]byte
	if err := s.read(s.ctl+off, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (s *Session) setWord(off, v uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return s.write(off, b[:])
}

func (s *Session) read(addr uint64, b []byte) error {
	_, err := s.mem.ReadAt(b, int64(addr))
	return s.memError(err)
}

func (s *Session) write(off uint64, b []byte) error {
	_, err := s.mem.WriteAt(b, int64(s.ctl+off))
	return s.memError(err)
}

// memError says that the process is gone, for the errors an exited
// process's memory gives.
func (s *Session) memError(err error) error {
	if err == nil {
		return nil
	}
	// Memory an exited process no longer has reads as its end.
	if errors.Is(err, io.EOF) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("process %d: %w: %w", s.pid, ErrExited, err)
	}
	return fmt.Errorf("process %d: %w", s.pid, err)
}

// ErrExited is the error of a session whose process has exited.
var ErrExited = errors.New("the process has exited")

// accessError explains why this user may not trace process pid, for the
// error opening its memory gave.
func accessError(pid int, err error) error {
	if !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	var st unix.Stat_t
	if unix.Stat(fmt.Sprintf("/proc/%d", pid), &st) == nil && int(st.Uid) != os.Geteuid() && os.Geteuid() != 0 {
		return fmt.Errorf("process %d belongs to user %d: tracing another user's process needs CAP_SYS_PTRACE (run it with sudo), or -transport bpf as root", pid, st.Uid)
	}
	if b, rerr := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); rerr == nil {
		switch scope := strings.TrimSpace(string(b)); scope {
		case "1":
			return fmt.Errorf("process %d: %w: Yama's ptrace_scope is 1, so only a parent may read a process's memory; run the program under the tracer (trace -- CMD), or as root: echo 0 > /proc/sys/kernel/yama/ptrace_scope", pid, err)
		case "2", "3":
			return fmt.Errorf("process %d: %w: Yama's ptrace_scope is %s, which needs CAP_SYS_PTRACE (run it with sudo)", pid, err, scope)
		}
	}
	if dumpable(pid) == "0" {
		return fmt.Errorf("process %d: %w: the process is not dumpable (it changed its credentials, or set PR_SET_DUMPABLE to 0), which needs CAP_SYS_PTRACE", pid, err)
	}
	return fmt.Errorf("process %d: %w: reading its memory needs ptrace access (CAP_SYS_PTRACE, or the same user)", pid, err)
}

// dumpable is the process's dumpable flag as /proc/PID/status cannot
// give it; empty when unknown. The owner of /proc/PID is root for a
// process that is not dumpable.
func dumpable(pid int) string {
	var st unix.Stat_t
	if unix.Stat(fmt.Sprintf("/proc/%d/mem", pid), &st) != nil {
		return ""
	}
	if st.Uid == 0 && os.Geteuid() != 0 {
		return "0"
	}
	return ""
}

// BiasOf is Bias of the executable file.
func BiasOf(pid int, file string) (uint64, error) {
	f, err := elf.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return Bias(pid, f)
}

// Bias is how far process pid loaded the executable at path from its
// link-time addresses: 0 unless it is position-independent.
func Bias(pid int, f *elf.File) (uint64, error) {
	if f.Type != elf.ET_DYN {
		return 0, nil
	}
	var first *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			first = p
			break
		}
	}
	if first == nil {
		return 0, errors.New("the executable has no loadable segment")
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, accessError(pid, err)
	}
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, accessError(pid, err)
	}
	defer maps.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe {
			continue
		}
		start, _, _ := strings.Cut(f[0], "-")
		lo, err1 := strconv.ParseUint(start, 16, 64)
		off, err2 := strconv.ParseUint(f[2], 16, 64)
		if err1 == nil && err2 == nil && off == first.Off&^(first.Align-1) {
			return lo - (first.Vaddr &^ (first.Align - 1)), nil
		}
	}
	return 0, fmt.Errorf("process %d has no mapping of %s", pid, exe)
}

// monotonic is CLOCK_MONOTONIC in ns, read as the program's writers
// read it: runtime.nanotime, through the vDSO. x/sys's ClockGettime is a
// system call, and Take and the tick clock read the clock at every poll.
//
//go:linkname monotonic runtime.nanotime
func monotonic() int64

// innerPid is pid as the process itself knows it: the last of its
// status's NSpid, in its innermost PID namespace, which the writer's
// process_vm_readv of itself must name. A process in a container sees
// another number than the tracer outside it does.
func innerPid(pid int) int {
	ns, ok := StatusField(fmt.Sprintf("/proc/%d/status", pid), "NSpid")
	if f := strings.Fields(ns); ok && len(f) > 0 {
		if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
			return n
		}
	}
	return pid
}

// flushes says which of ops take their source from the bytes of a read
// gathered since the last one that does (OpFlush): a writer that gathers
// the reads it does not hold into one process_vm_readv must have those
// read first. A held read is never gathered.
func flushes(ops []values.Op) []bool {
	flush := make([]bool, len(ops))
	var gathered []values.Op
	for i, op := range ops {
		if op.From == values.FromPtr || op.From == values.FromSlice {
			// The pointer, and a slice's or string's length after it.
			end := int(op.Src) + 8
			if op.From == values.FromSlice {
				end += 8
			}
			for _, g := range gathered {
				if int(op.Src) < int(g.Dst)+int(g.Max) && end > int(g.Dst) {
					flush[i] = true
					gathered = gathered[:0]
					break
				}
			}
		}
		if !op.Held {
			gathered = append(gathered, op)
		}
	}
	return flush
}
