package benchauto

import (
	"github.com/go-usdt/usdt/internal/testing/benchpair"
	"testing"
)

// Every benchmark times one iteration of a plain b.N loop around one call,
// with the results summed into a sink, as in internal/testing/bench: in a b.Loop
// body the compiler keeps arguments and results alive, which would add
// code of its own around the call under test.
//
// The test binary is built twice by scripts/bench-auto.sh, plain and
// instrumented (rules.yml selects Work and Add). Comparing one benchmark
// across the two binaries gives what a user sees; comparing Work with
// WorkRef, or Add with AddNoinline, inside one binary separates the
// causes (see the paired benchmarks).

// sink keeps the loops' results alive.
var sink int

func BenchmarkWork(b *testing.B) {
	s := 0
	for i := 0; i < b.N; i++ {
		s += Work(i)
	}
	sink = s
}

func BenchmarkWorkRef(b *testing.B) {
	s := 0
	for i := 0; i < b.N; i++ {
		s += WorkRef(i)
	}
	sink = s
}

func BenchmarkAdd(b *testing.B) {
	s := 0
	for i := 0; i < b.N; i++ {
		s = Add(s, i)
	}
	sink = s
}

func BenchmarkAddNoinline(b *testing.B) {
	s := 0
	for i := 0; i < b.N; i++ {
		s = AddNoinline(s, i)
	}
	sink = s
}

// The paired benchmarks time short blocks of a reference loop and of the
// loop under test alternately, inside one process, and report the medians
// over all blocks, per call, of ref-ns/call, fn-ns/call and their
// difference added-ns/call: a preemption or a noisy neighbour spoils a
// few blocks of both kinds alike rather than one whole benchmark. Their
// ns/op counts one iteration of both loops.
//
//	PairedWork: ref = WorkRef, fn = Work. In the instrumented binary,
//	    added is what the disabled probes add to a non-inlined function;
//	    in the plain binary it should be about 0 (code placement only).
//	PairedAdd:  ref = AddNoinline, fn = Add. In the plain binary, added
//	    is minus what inlining saves; in the instrumented binary, it is
//	    what the disabled probes add to a call that is not inlined anyway.

func BenchmarkPairedWork(b *testing.B) { benchPaired(b, loopWorkRef, loopWork) }

func BenchmarkPairedAdd(b *testing.B) { benchPaired(b, loopAddNoinline, loopAdd) }

func benchPaired(b *testing.B, ref, fn func(n int) int) {
	sink = benchpair.Run(b, ref, fn, "ref-ns/call", "fn-ns/call")
}

// The loops of the paired benchmarks: the same loops as the benchmarks
// above, kept out of line so that each is one call per block.

//go:noinline
func loopWork(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += Work(i)
	}
	return s
}

//go:noinline
func loopWorkRef(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += WorkRef(i)
	}
	return s
}

//go:noinline
func loopAdd(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s = Add(s, i)
	}
	return s
}

//go:noinline
func loopAddNoinline(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s = AddNoinline(s, i)
	}
	return s
}
