// Package benchpair measures the added cost of a function against a
// reference inside one process: on a noisy machine, alternating short timed
// blocks of the two gives steadier differences than separate benchmarks.
package benchpair

import (
	"slices"
	"testing"
	"time"
)

// Block is the calls per timed block: long enough that reading the clock is
// negligible and few blocks are interrupted.
const Block = 2048

// Run times alternating blocks of ref(Block) and fn(Block) and reports the
// median per-call time of each under refMetric and fnMetric, and of their
// difference as "added-ns/call". It returns the loops' sum, for a sink.
func Run(b *testing.B, ref, fn func(n int) int, refMetric, fnMetric string) int {
	blocks := (b.N + Block - 1) / Block
	refs := make([]float64, 0, blocks)
	fns := make([]float64, 0, blocks)
	added := make([]float64, 0, blocks)
	s := 0
	b.ResetTimer()
	for k := range blocks {
		// Alternate which loop goes first, so that neither always runs
		// with warmer caches or right after the clock read.
		first, second := ref, fn
		if k%2 == 1 {
			first, second = fn, ref
		}
		t0 := time.Now()
		s += first(Block)
		t1 := time.Now()
		s += second(Block)
		t2 := time.Now()
		p, q := t1.Sub(t0), t2.Sub(t1)
		if k%2 == 1 {
			p, q = q, p
		}
		refs = append(refs, float64(p)/Block)
		fns = append(fns, float64(q)/Block)
		added = append(added, float64(q-p)/Block)
	}
	b.StopTimer()
	b.ReportMetric(median(refs), refMetric)
	b.ReportMetric(median(fns), fnMetric)
	b.ReportMetric(median(added), "added-ns/call")
	return s
}

// median sorts v and returns its median.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
