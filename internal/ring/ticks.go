package ring

import (
	"math"
	"os"
	"slices"
	"strings"
	"time"
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
// CLOCK_MONOTONIC over d.
func calibrate(d time.Duration) uint64 {
	t0, ns0 := ticksAndNs()
	time.Sleep(d)
	t1, ns1 := ticksAndNs()
	return uint64(float64(ns1-ns0) / float64(t1-t0) * (1 << 32))
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
