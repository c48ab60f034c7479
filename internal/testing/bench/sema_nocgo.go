//go:build linux && !cgo && (amd64 || arm64)

package bench

// route names the build route this file belongs to: Plan9 stubs, with the
// semaphores in a Go table that usdt-toolexec exposes at link time.
const route = "plan9"

// semaphores returns the semaphores of bench:hit and bench:str, the very
// addresses the generated init registers with usdtrt.Register. The runtime's
// registry keeps those pointers to itself (usdtrt.Probes reports only whether
// a probe is enabled), so the tests take them from the generated table and
// check through usdtrt.Probes that they are the registered ones.
func semaphores() (hit, str *uint16) {
	return &usdtBenchTable.semaphores[0], &usdtBenchTable.semaphores[1]
}
