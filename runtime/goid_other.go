//go:build !amd64 && !arm64

package runtime

// Goid returns the current goroutine's id, the number Go prints in stack
// traces ("goroutine 7 [running]:"). Tracers cannot compute it, so generated
// probes pass it along to let scripts follow a single goroutine.
//
// This architecture has no assembly helper to reach the runtime's g, so Goid
// parses runtime.Stack on every call: correct on every Go version, but it
// costs a few microseconds. It returns 0 if the traceback cannot be parsed.
func Goid() int64 { return stackGoid() }
