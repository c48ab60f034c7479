package ring

import (
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// stableTicks reports whether the time-stamp counter counts at one rate on
// every CPU, in every power state (the kernel's constant_tsc and
// nonstop_tsc), so that ticks timed on one CPU and another make a call's
// time.
func stableTicks() bool {
	if readTicks == nil {
		return false
	}
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		name, flags, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(name) == "flags" {
			f := strings.Fields(flags)
			return slices.Contains(f, "constant_tsc") && slices.Contains(f, "nonstop_tsc")
		}
	}
	return false
}

// calibrate measures the nanoseconds of 1<<32 ticks against
// CLOCK_MONOTONIC over d, and returns the readings it measured between.
func calibrate(d time.Duration) (tickNs uint64, from, to anchor) {
	from = readAnchor()
	time.Sleep(d)
	to = readAnchor()
	return uint64(float64(to.ns-from.ns) / float64(to.ticks-from.ticks) * (1 << 32)), from, to
}

// anchor is a reading of the counter and CLOCK_MONOTONIC at one moment.
type anchor struct {
	ticks uint64
	ns    int64
}

func readAnchor() anchor {
	t, ns := ticksAndNs()
	return anchor{t, ns}
}

// tickClock turns the times of records, read by the writers in ticks
// (ringlayout.TicksTag), into CLOCK_MONOTONIC's ns, as runtime.nanotime
// would have read them, by the very rate at which the program turns
// ticks into a call's elapsed ns (TickNsAt): an exit's start, its time
// less its elapsed ns, is then never before its entry's time, nor its
// end after its exit's, as with runtime.nanotime. A rate measured over
// 10 ms is a few ppm off, and CLOCK_MONOTONIC is slewed by NTP, so every
// period (rerate) the tracer measures the rate again over all its
// readings so far, adds the slew that brings its ns back to the clock's
// over the next period (at most 500 ppm), and writes it for the
// program: the ns go on from where they were, at the new rate (a
// segment), so that they never jump. A call timed across such a change
// may be off by a few ns.
type tickClock struct {
	mu    sync.Mutex
	first anchor // the first reading, the longest baseline
	segs  segments
	// due is when to measure the rate again, by Go's clock: Take asks
	// at every poll, and a reading of both clocks takes 16 system calls
	// (CLOCK_MONOTONIC's own, through x/sys), which at 50 polls a second
	// were a tenth of an idle trace's CPU.
	due    time.Time
	period time.Duration
}

// segment is a stretch of the ticks from t0 on, turned into ns from ns0
// on at k ns a 1<<32 ticks.
type segment struct {
	t0  uint64
	ns0 int64
	k   uint64
}

// at is the ns of t, as the program's exits reckon them: the ticks
// since t0 times k, the low 32 bits dropped.
func (s segment) at(t uint64) int64 {
	if t >= s.t0 {
		hi, lo := bits.Mul64(t-s.t0, s.k)
		return s.ns0 + int64(hi<<32|lo>>32)
	}
	hi, lo := bits.Mul64(s.t0-t, s.k)
	return s.ns0 - int64(hi<<32|lo>>32)
}

// rerateEvery is how often the tracer measures the rate again, and
// maxSegments how many rates it keeps for records written before the
// latest (80 s of them); older ones are reckoned by the oldest.
const (
	rerateEvery = 5 * time.Second
	maxSegments = 16
)

// start has the ns begin at to at the rate k, measured from from.
func (c *tickClock) start(k uint64, from, to anchor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.first, c.segs = from, []segment{{to.ticks, to.ns, k}}
	c.due = time.Now().Add(c.every())
}

func (c *tickClock) every() time.Duration {
	if c.period > 0 {
		return c.period
	}
	return rerateEvery
}

// rerate measures the rate again when a period has passed, and returns
// the new rate for the program, or ok false.
func (c *tickClock) rerate() (k uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.segs) == 0 || time.Now().Before(c.due) {
		return 0, false
	}
	n := readAnchor()
	if n.ticks <= c.first.ticks {
		return 0, false
	}
	cur := c.segs[len(c.segs)-1]
	if n.ticks <= cur.t0 {
		return 0, false
	}
	at := cur.at(n.ticks)
	every := c.every().Nanoseconds()
	rate := float64(n.ns-c.first.ns) / float64(n.ticks-c.first.ticks)
	slew := max(-5e-4, min(5e-4, float64(n.ns-at)/float64(every)))
	k = uint64(rate * (1 + slew) * (1 << 32))
	c.segs = append(c.segs, segment{n.ticks, at, k})
	if len(c.segs) > maxSegments {
		c.segs = c.segs[1:]
	}
	c.due = time.Now().Add(c.every())
	return k, true
}

// segments are the rates at hand for one Take, copied once under the
// lock rather than taken for each record.
func (c *tickClock) segments() segments {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.segs)
}

// segments are a tickClock's, the latest last.
type segments []segment

// mono is t in CLOCK_MONOTONIC's ns: t itself where it is not in ticks.
func (ss segments) mono(t int64) int64 {
	if t >= 0 {
		return t
	}
	if len(ss) == 0 {
		return 0
	}
	ticks := uint64(t) &^ ringlayout.TicksTag
	i := len(ss) - 1
	for i > 0 && ss[i].t0 > ticks {
		i--
	}
	return ss[i].at(ticks)
}

// ticksAndNs reads the counter and CLOCK_MONOTONIC at one moment: the
// clock between two counter reads, the narrowest of a few tries, since
// a read that a preemption stretched is worth less.
func ticksAndNs() (ticks uint64, ns int64) {
	best := uint64(math.MaxUint64)
	for range 16 {
		t0 := readTicks()
		n := monotonic()
		t1 := readTicks()
		if t1-t0 < best {
			best, ticks, ns = t1-t0, t0+(t1-t0)/2, n
		}
	}
	return ticks, ns
}
