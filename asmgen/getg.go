package asmgen

import "fmt"

// ReadG returns a Plan9 function, symbol, that reads the running
// goroutine's runtime g, which Go code cannot reach (the runtime's getg is
// a compiler intrinsic, and the linker refuses new linknames into the
// runtime). With off < 0 it returns g itself, as func() unsafe.Pointer;
// otherwise the word at offset off inside g, as func() int64. It needs no
// stack (NOSPLIT). ok is false for an architecture without one.
func ReadG(arch Arch, symbol string, off int64) (fn string, ok bool) {
	var load, field, ret string
	switch arch {
	case AMD64:
		// ABI0 code cannot rely on R14 holding g (only ABIInternal does),
		// but the thread-local slot is kept current in both ABIs.
		load, field, ret = "\tMOVQ (TLS), AX\n", "\tMOVQ %d(AX), AX\n", "\tMOVQ AX, ret+0(FP)\n"
		if off >= 0 {
			load += fmt.Sprintf(field, off)
		}
	case ARM64:
		// Every Go ABI keeps g in R28, which the assembler calls g.
		load, ret = "\tMOVD g, R0\n", "\tMOVD R0, ret+0(FP)\n"
		if off >= 0 {
			load = fmt.Sprintf("\tMOVD %d(g), R0\n", off)
		}
	default:
		return "", false
	}
	return fmt.Sprintf("TEXT ·%s(SB), %d, $0-8\n", symbol, flagNOSPLIT) + load + ret + "\tRET\n", true
}
