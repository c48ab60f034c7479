// Package metrics is what trace -stats counts, as the metrics exporters
// take it: per function (or provider probe) its calls and, for a function
// whose exit probe carries its elapsed time, their durations, and the
// events the tracer lost. With -otlp's spans, a Tally counts the same
// from the events trace reads (-otlp URL -metrics ADDR), and the calls
// whose last result was a non-nil error too, and the spans dropped. It
// imports nothing but the standard library: the tracer, which
// usdt-toolexec links, hands Snapshots to the exporters, which only
// usdt-export links (internal/export/prom for Prometheus,
// internal/export/otlp for OTLP metrics).
//
// The counters count durations in 64 buckets, powers of two of ns. The
// exporters give fewer: the classic buckets at every second power of two
// of ns, from 16 ns to 2^36 ns (68.7 s), 17 bounds and the bucket past
// them, merged exactly from the counters; docs/tracing.md says why.
package metrics

import (
	"maps"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
)

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
	// CountsErrors says that Errors counts the calls whose last result,
	// an error, was not nil: the function's last result is an error,
	// and the tracer read the results (a Tally).
	CountsErrors bool
	Errors       uint64
	// Exemplars are sampled calls of the function whose spans -otlp
	// sent, the latest of each exported bucket (BucketCounts), in the
	// buckets' order.
	Exemplars []Exemplar
}

// Exemplar is one call's span, which its duration's bucket points to.
type Exemplar struct {
	TraceID [16]byte
	SpanID  [8]byte
	Ns      uint64
	Time    time.Time // when the call returned
}

// Bucket is the exported bucket of e's duration: its index in
// BucketCounts.
func (e Exemplar) Bucket() int { return exportedBucket(counterBucket(e.Ns)) }

// counterBucket is the counter bucket of a duration of ns: its bit
// length, the last bucket holding the longest.
func counterBucket(ns uint64) int { return min(bits.Len64(ns), 63) }

// Snapshot is the counts at one moment.
type Snapshot struct {
	Functions []Function
	// Lost counts the events the tracer lost.
	Lost uint64
	// Processes is how many processes are traced now: the command and
	// the children trace follows, or -exe's processes; 0 where the
	// tracer does not say.
	Processes int
	// Events says that trace counted the calls from the events it read
	// (a Tally), not the program or the kernel: Lost and Processes are
	// not known then.
	Events bool
	// SpansDropped counts, by reason, the spans of -otlp that did not
	// reach the collector; nil without spans.
	SpansDropped map[string]uint64
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
			f.Errors += fn.Errors
			f.CountsErrors = f.CountsErrors || fn.CountsErrors
			f.Exemplars = append(f.Exemplars, fn.Exemplars...)
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
	counts := make([]uint64, exportedBucket(lastBound+1)+1)
	for b, c := range fn.Buckets {
		counts[exportedBucket(b)] += c
	}
	return counts
}

// exportedBucket is the index in BucketCounts of the counter bucket b.
func exportedBucket(b int) int {
	if b > lastBound {
		return (lastBound-firstBound)/boundStep + 1
	}
	return max(0, (b-firstBound+boundStep-1)/boundStep)
}

// Sum is fn's total duration in seconds.
func (fn Function) Sum() float64 { return float64(fn.SumNs) / 1e9 }

// Tally counts calls from their events: one goroutine calls Call and
// Exemplar, any takes Snapshots.
type Tally struct {
	mu  sync.Mutex
	at  map[string]int
	fns []Function
	// exemplars are each function's, by exported bucket.
	exemplars []map[int]Exemplar
}

// fn is the function name's counts, new ones the first time. t.mu is held.
func (t *Tally) fn(name string) int {
	i, ok := t.at[name]
	if !ok {
		if t.at == nil {
			t.at = map[string]int{}
		}
		i = len(t.fns)
		t.at[name] = i
		t.fns = append(t.fns, Function{Name: name})
		t.exemplars = append(t.exemplars, nil)
	}
	return i
}

// Exemplar keeps e as the latest exemplar of its bucket of the function
// name.
func (t *Tally) Exemplar(name string, e Exemplar) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.fn(name)
	if t.exemplars[i] == nil {
		t.exemplars[i] = map[int]Exemplar{}
	}
	t.exemplars[i][e.Bucket()] = e
}

// Call counts a call of the function (or a fire of the probe) name. A
// timed call took ns. errResult says that its last result is an error,
// and failed that it was not nil.
func (t *Tally) Call(name string, timed bool, ns uint64, errResult, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn := &t.fns[t.fn(name)]
	fn.Calls++
	if timed {
		if fn.Buckets == nil {
			fn.Buckets = make([]uint64, 64)
		}
		fn.Timed = true
		fn.SumNs += ns
		fn.Buckets[counterBucket(ns)]++
	}
	if errResult {
		fn.CountsErrors = true
		if failed {
			fn.Errors++
		}
	}
}

// Snapshot is what t has counted so far, a copy of its own.
func (t *Tally) Snapshot() *Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &Snapshot{Events: true, Functions: make([]Function, len(t.fns))}
	for i, fn := range t.fns {
		fn.Buckets = append([]uint64(nil), fn.Buckets...)
		for _, b := range slices.Sorted(maps.Keys(t.exemplars[i])) {
			fn.Exemplars = append(fn.Exemplars, t.exemplars[i][b])
		}
		s.Functions[i] = fn
	}
	return s
}
