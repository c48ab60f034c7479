package ring

import (
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
// CLOCK_MONOTONIC over d, each end read between two counter reads so that
// a preemption between them shows.
func calibrate(d time.Duration) uint64 {
	pair := func() (ticks uint64, ns int64) {
		for {
			t0 := readTicks()
			ns = monotonic()
			t1 := readTicks()
			// A read that took longer than 10 µs was preempted.
			if t1-t0 < 1<<15 {
				return t0 + (t1-t0)/2, ns
			}
		}
	}
	t0, ns0 := pair()
	time.Sleep(d)
	t1, ns1 := pair()
	return uint64(float64(ns1-ns0) / float64(t1-t0) * (1 << 32))
}
