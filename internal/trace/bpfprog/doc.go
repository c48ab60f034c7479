// Package bpfprog holds the BPF programs the tracer loads: the event
// program that sends each fired probe's arguments and Go values through a
// ring buffer, the -stats program that counts calls and their latencies
// in per-CPU counters, and the tracepoint programs that keep the set of a
// command's tasks. With them are the layouts they share with the tracer:
// where a note's argument sits in the kernel's pt_regs, and the records
// and counters the tracer reads.
//
// The programs are written with cilium/ebpf's assembler rather than
// compiled from C, so there is no generated object to keep in step with
// the source.
package bpfprog
