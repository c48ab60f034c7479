//go:build !linux || !(amd64 || arm64)

package bench

// route: the generated probes compile to nothing on this platform.
const route = "none"

// semaphores returns nil: there are no semaphores on this platform.
func semaphores() (hit, str *uint16) { return nil, nil }
