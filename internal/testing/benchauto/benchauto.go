package benchauto

// Work is a function of a few lines that is never inlined, instrumented or
// not: the common case of a selected function. rules.yml selects it; it is
// too large for usdt-toolexec to split, so its probes and the exit probe's
// deferred call are in its own body.
//
//go:noinline
func Work(i int) int {
	x := i*7 + 3
	if x&4 != 0 {
		x ^= x >> 3
	}
	return x + i>>2
}

// WorkRef is Work under another name, selected by no rule: the
// uninstrumented reference for Work in the instrumented binary.
//
//go:noinline
func WorkRef(i int) int {
	x := i*7 + 3
	if x&4 != 0 {
		x ^= x >> 3
	}
	return x + i>>2
}

// Add is a tiny leaf function that the compiler inlines into its callers.
// rules.yml selects it; usdt-toolexec splits it, and it stays inlinable.
func Add(a, b int) int { return a + b }

// AddNoinline is Add kept out of line and selected by no rule: what a call
// of Add costs once it is not inlined, without any probe.
//
//go:noinline
func AddNoinline(a, b int) int { return a + b }
