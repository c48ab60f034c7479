// Package metrics is what trace -stats counts, as the metrics exporters
// take it: per function (or provider probe) its calls and, for a function
// whose exit probe carries its elapsed time, their durations, and the
// events the tracer lost. It imports nothing but the standard library's
// math: the tracer, which usdt-toolexec links, hands Snapshots to the
// exporters, which only usdt-export links (internal/export/prom for
// Prometheus, internal/export/otlp for OTLP metrics).
//
// The counters count durations in 64 buckets, powers of two of ns. The
// exporters give fewer: the classic buckets at every second power of two
// of ns, from 16 ns to 2^36 ns (68.7 s), 17 bounds and the bucket past
// them, merged exactly from the counters; docs/tracing.md says why.
package metrics

import "math"

// Function is what has been counted of one function (or probe) since
// the trace began.
type Function struct {
	// Name is the function's fully qualified name, or a probe's
	// provider:name.
	Name  string
	Calls uint64
	// Timed says that Buckets and SumNs hold the calls' durations:
	// Buckets[b] counts those of bit length b in ns (0 for 0 ns, b for
	// [2^(b-1), 2^b)).
	Timed   bool
	SumNs   uint64
	Buckets []uint64
}

// Snapshot is the counts at one moment.
type Snapshot struct {
	Functions []Function
	// Lost counts the events the tracer lost.
	Lost uint64
	// Processes is how many processes are traced now: the command and
	// the children trace follows, or -exe's processes; 0 where the
	// tracer does not say.
	Processes int
}

// Sum is the snapshots' counts added up, function by function (by
// Name, in the order first seen), their losses and processes too: the
// counts of several processes of one executable as one.
func Sum(snaps ...*Snapshot) *Snapshot {
	sum := &Snapshot{}
	at := map[string]int{}
	for _, s := range snaps {
		if s == nil {
			continue
		}
		sum.Lost += s.Lost
		sum.Processes += s.Processes
		for _, fn := range s.Functions {
			i, ok := at[fn.Name]
			if !ok {
				i = len(sum.Functions)
				at[fn.Name] = i
				sum.Functions = append(sum.Functions, Function{Name: fn.Name})
			}
			f := &sum.Functions[i]
			f.Calls += fn.Calls
			f.SumNs += fn.SumNs
			f.Timed = f.Timed || fn.Timed
			if len(f.Buckets) < len(fn.Buckets) {
				f.Buckets = append(f.Buckets, make([]uint64, len(fn.Buckets)-len(f.Buckets))...)
			}
			for b, n := range fn.Buckets {
				f.Buckets[b] += n
			}
		}
	}
	return sum
}

// The exported buckets' upper bounds are 2^b ns for b from firstBound to
// lastBound, every boundStep.
const (
	firstBound = 4
	lastBound  = 36
	boundStep  = 2
)

// Bounds are the upper bounds, in seconds, of the exported buckets but
// the last, which takes the durations past them: 16 ns, 64 ns, 256 ns,
// ... 2^36 ns. A fresh slice each call.
func Bounds() []float64 {
	var b []float64
	for e := firstBound; e <= lastBound; e += boundStep {
		b = append(b, UpperBound(e))
	}
	return b
}

// UpperBound is the upper bound, in seconds, of the durations of bit
// length b in ns: 2^b ns (b 0 holds 0 ns only, below 1 ns).
func UpperBound(b int) float64 { return math.Ldexp(1, b) / 1e9 }

// BucketCounts are fn's durations in the exported buckets, as OTLP's
// explicit-bounds histogram has them: counts[i] the calls no longer than
// Bounds()[i] and longer than the bound before, and the last element
// those longer than every bound. A counter bucket of bit length b holds
// durations below 2^b ns, so each falls whole into one exported bucket:
// the first whose bound is 2^b ns or more.
func (fn Function) BucketCounts() []uint64 {
	n := (lastBound-firstBound)/boundStep + 1
	counts := make([]uint64, n+1)
	for b, c := range fn.Buckets {
		i := n
		if b <= lastBound {
			i = max(0, (b-firstBound+boundStep-1)/boundStep)
		}
		counts[i] += c
	}
	return counts
}

// Sum is fn's total duration in seconds.
func (fn Function) Sum() float64 { return float64(fn.SumNs) / 1e9 }
