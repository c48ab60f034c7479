//go:build amd64 || arm64

package runtime

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// getg returns the current goroutine's runtime g, which assembly can reach
// directly (TLS on amd64, register R28 on arm64) but Go code cannot: the
// runtime's getg is a compiler intrinsic, and since Go 1.23 the linker
// rejects //go:linkname references to most runtime internals.
func getg() unsafe.Pointer

// goidState is the offset of the goid field within the runtime's g struct,
// plus one, once calibrateGoid has found it; 0 before calibration, or one of
// the negative modes below. A single atomic word keeps Goid's fast path to
// one load and one branch.
var goidState atomic.Int64

const (
	goidUseStack = -1 // calibration failed: parse tracebacks on every call
	goidUnknown  = -2 // tracebacks are unreadable: Goid returns 0
)

var goidOnce sync.Once

// Goid returns the current goroutine's id, the number Go prints in stack
// traces ("goroutine 7 [running]:"). Tracers cannot compute it, so generated
// probes pass it along to let scripts follow a single goroutine.
//
// The first call finds where the running Go version keeps the id inside its
// g struct (see calibrateGoid), which costs a few goroutine start-ups once;
// binaries that never fire a probe never pay it. Afterwards a call costs a few
// nanoseconds and does not allocate. Should calibration ever fail on a future
// Go version, Goid stays correct by parsing runtime.Stack on every call,
// which costs a few microseconds; should even that fail, it returns 0, which
// no user goroutine has.
func Goid() int64 {
	if s := goidState.Load(); s > 0 {
		return *(*int64)(unsafe.Add(getg(), s-1))
	}
	return goidSlow()
}

// goidSlow is kept out of line so that Goid's fast path stays a few
// instructions, free of the sync.Once and fallback code.
//
//go:noinline
func goidSlow() int64 {
	goidOnce.Do(calibrateGoid)
	switch s := goidState.Load(); {
	case s > 0:
		return *(*int64)(unsafe.Add(getg(), s-1))
	case s == goidUseStack:
		return stackGoid()
	}
	return 0
}

const (
	// goidScanLimit bounds the search for the goid field. It sits at 152
	// bytes in Go 1.26 and 1.27 and has moved little in years, because the
	// fields before it are ones the runtime's assembly and the linker know
	// by offset; 512 leaves ample room.
	goidScanLimit = 512
	// goidSamples is how many goroutines must agree on the offset. Each
	// has a different id, so a field that merely happens to hold the id of
	// one of them cannot match all.
	goidSamples = 4
)

type goidSample struct {
	g  unsafe.Pointer
	id int64
}

// calibrateGoid learns the goid field's offset empirically instead of
// hard-coding it per Go version: it compares the ids the runtime prints in
// tracebacks with the words at each offset of the corresponding g structs.
func calibrateGoid() {
	self := stackGoid()
	if self == 0 {
		goidState.Store(goidUnknown)
		return
	}
	samples := make([]goidSample, 1, goidSamples)
	samples[0] = goidSample{getg(), self}

	// The helpers stay parked until the scan is over: an exited
	// goroutine's g is recycled for the next one, with another id.
	got := make(chan goidSample)
	release := make(chan struct{})
	for range goidSamples - 1 {
		go func() {
			got <- goidSample{getg(), stackGoid()}
			<-release
		}()
	}
	for range goidSamples - 1 {
		samples = append(samples, <-got)
	}
	off, ok := findGoidOffset(samples)
	close(release)

	if !ok {
		goidState.Store(goidUseStack)
		return
	}
	goidState.Store(int64(off) + 1)
}

// findGoidOffset returns the first 8-aligned offset below goidScanLimit at
// which every sample's g holds its own id.
//
// Stopping at the first match means that, as long as the field exists, no
// read goes past it and so none leaves the g object; only if a future
// runtime dropped the field would the scan read the whole window, which may
// extend past the end of g into the neighbouring heap memory (g lives in a
// multi-page heap span, so that memory is mapped). checkptr, enabled by
// -race, would reject exactly that, hence nocheckptr: the bytes are only
// compared, never used as pointers.
//
//go:nocheckptr
func findGoidOffset(samples []goidSample) (uintptr, bool) {
	for _, s := range samples {
		if s.id <= 0 {
			return 0, false
		}
	}
	for off := uintptr(0); off+8 <= goidScanLimit; off += 8 {
		match := true
		for _, s := range samples {
			if *(*int64)(unsafe.Add(s.g, off)) != s.id {
				match = false
				break
			}
		}
		if match {
			return off, true
		}
	}
	return 0, false
}
