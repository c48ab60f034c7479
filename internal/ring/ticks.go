package ring

import (
	"math"
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
// would have read them: from the latest of its readings of both clocks,
// at the rate between that one and one at least anchorGap before it.
// Take reads the clocks again each time, so a record's time is within a
// poll or two of a reading, and CLOCK_MONOTONIC's slewing by NTP (at most
// 500 ppm) moves it by a few µs at most.
type tickClock struct {
	mu   sync.Mutex
	a, b anchor // b the latest
}

// anchorGap is the least time between the two readings that give the
// rate: a reading's uncertainty (tens of ns) is then a few ppm of it.
const anchorGap = 10 * time.Millisecond

// renew reads both clocks again.
func (c *tickClock) renew() {
	n := readAnchor()
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.ns-c.b.ns >= anchorGap.Nanoseconds() && n.ticks > c.b.ticks {
		c.a, c.b = c.b, n
	}
}

// mono is t in CLOCK_MONOTONIC's ns: t itself where it is not in ticks.
func (c *tickClock) mono(t int64) int64 {
	if t >= 0 {
		return t
	}
	c.mu.Lock()
	a, b := c.a, c.b
	c.mu.Unlock()
	if b.ticks == a.ticks {
		return b.ns
	}
	rate := float64(b.ns-a.ns) / float64(b.ticks-a.ticks)
	d := int64(uint64(t)&^ringlayout.TicksTag - b.ticks)
	return b.ns + int64(math.Round(float64(d)*rate))
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
