#include "textflag.h"

// func getg() unsafe.Pointer
//
// On arm64 every Go ABI keeps g in R28, which the assembler calls g.
TEXT ·getg(SB), NOSPLIT, $0-8
	MOVD	g, R0
	MOVD	R0, ret+0(FP)
	RET
