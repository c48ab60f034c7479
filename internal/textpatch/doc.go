// Package textpatch switches a running program's functions to other
// functions of the same signature, and back: the run-time half of
// switching a function built as the plain build compiles it to its
// traced copy while someone traces (issue 51).
//
// A Patch is planned from the executable (Planner), once, written into
// a process by Switch and taken back by Restore, with every thread of the
// process stopped (ptrace seize and interrupt). Every write replaces one
// instruction by another of the same length, or bytes inside one
// instruction, so no thread can be stopped inside the bytes written, nor
// have been interrupted there by a signal whose frame would return there.
//
// # amd64: through the stack check
//
// Every Go function with a frame starts by comparing the stack pointer
// with the goroutine's bound, 16(R14), and branches, when the stack must
// grow, to code at its end that spills the argument registers into their
// slots, calls runtime.morestack_noctxt, reloads them and starts the
// function again. A switch makes two writes:
//   - the CALL there becomes a JMP, of the same 5 bytes, to the target;
//   - the compare's displacement, one byte inside the instruction,
//     becomes 8: the top of the stack, g.stack.hi, which the stack
//     pointer is always below, so that every call branches there.
//
// A switched call so runs the compare, the taken branch, the spills and
// the jump, and enters the target with the arguments where its caller
// put them. A goroutine that a stack growth or a preemption parked in
// runtime.morestack resumes after the CALL, in bytes neither write
// touches, and starts the function again, which now branches to the
// target. The runtime sees no PC it does not know: the jump sits in the
// function's own code, where its tables say the frame is not yet made.
//
// The entry's first byte is never written, and neither is any
// instruction after the stack check. A uprobe (bpftrace's uprobe:, perf
// probe) or a debugger's breakpoint at the entry writes over the first
// byte only, and the kernel runs the instruction it read from the file
// out of line: the original compare, so that while it is there calls
// run the plain function. Its removal puts back the first byte, which
// the switch kept: the switch is whole again, whatever the order of the
// writers. The notes of sites: notes, past the stack check, are not
// touched either.
//
// Functions without the check (frameless ones, NOSPLIT ones, those
// whose frame is larger than the stack guard, which check differently)
// and closures (which grow their stack through runtime.morestack, with
// a context register) are refused, and Plan says why.
//
// # arm64
//
// An instruction is 4 bytes, written in one store: the entry's first
// instruction becomes B to the target (within 128 MiB). A uprobe put at
// the entry after the switch runs the plain function while it is there,
// and its removal puts back the plain instruction, which undoes the
// switch.
package textpatch
