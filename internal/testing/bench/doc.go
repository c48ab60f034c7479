// Package bench holds the probe-cost benchmarks: what a usdtgen probe adds to
// a loop while no tracer is attached (the disabled path, a semaphore load and
// a branch), and what firing one costs without a tracer (the enabled path up
// to the stub's NOP, including the NUL-terminated string copy).
//
// The probes are in bench.d. Run both build routes side by side with
// scripts/bench.sh; BENCHMARKS.md records the figures.
package bench

//go:generate go run github.com/go-usdt/usdt/cmd/usdtgen bench.d
