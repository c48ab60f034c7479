// Package ring is the in-process transport: while a tracer records this
// way, an enabled probe's trampoline writes its event into a buffer in
// the program's own memory, one per P, and returns, with no trap. The
// tracer finds the buffer by its symbol (or Where), turns the probes on
// and reads the events through /proc/PID/mem, as the user who owns the
// process: no BPF, no tracefs, no perf events.
//
// Its memory's layout, which the program's writers share, is package
// ringlayout's.
package ring

// The magic words of the Where symbol of earlier layouts: whereMagic1,
// "\x7fUSDTrng", whose writer read values with plain loads; whereMagic2,
// "\x7fUSDTrn2", whose tracer and writer both took every semaphore down
// by one.
const (
	whereMagic1 = 0x676e72544453557f
	whereMagic2 = 0x326e72544453557f
)
