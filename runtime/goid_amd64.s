#include "textflag.h"

// func getg() unsafe.Pointer
//
// ABI0 code cannot rely on R14 holding g (only ABIInternal does), but the
// thread-local slot is kept current in both ABIs.
TEXT ·getg(SB), NOSPLIT, $0-8
	MOVQ	(TLS), AX
	MOVQ	AX, ret+0(FP)
	RET
