// Package benchauto holds the benchmarks of automatic probes: what the
// entry and exit probes that usdt-toolexec adds to a function selected by a
// rules file cost per call while no tracer is attached.
//
// The same test binary is built twice, plain and with
// -toolexec="usdt-toolexec -rules internal/testing/benchauto/rules.yml"; rules.yml
// selects Work and Add, and nothing else. WorkRef and AddNoinline are
// identical copies that no rule selects: in the instrumented binary they
// are the uninstrumented reference inside the same process, and in the
// plain binary AddNoinline is what Add costs once it is no longer inlined.
//
// scripts/bench-auto.sh builds both binaries, checks which functions got
// probes, runs the two binaries interleaved and prints the figures;
// BENCHMARKS.md ("Automatic probes") records them.
package benchauto
