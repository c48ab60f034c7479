//go:build linux && cgo && (amd64 || arm64)

package bench

/*
// Declared again because cgo resolves C names per file; the definitions
// are in bench_usdt_cgo_$GOARCH.S, so a renamed symbol fails the link.
extern unsigned short usdt_9cb18d70_bench_hit_sema;
extern unsigned short usdt_9cb18d70_bench_str_sema;
*/
import "C"

import "unsafe"

// route names the build route this file belongs to: GNU .S stubs, with the
// semaphores in C variables that Go reads through cgo.
const route = "cgo"

// semaphores returns the semaphores of bench:hit and bench:str, the very
// addresses the generated init registers with usdtrt.Register. The runtime's
// registry keeps those pointers to itself (usdtrt.Probes reports only whether
// a probe is enabled), so the tests take them from the C variables and check
// through usdtrt.Probes that they are the registered ones.
func semaphores() (hit, str *uint16) {
	return (*uint16)(unsafe.Pointer(&C.usdt_9cb18d70_bench_hit_sema)),
		(*uint16)(unsafe.Pointer(&C.usdt_9cb18d70_bench_str_sema))
}
