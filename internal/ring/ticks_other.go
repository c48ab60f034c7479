//go:build !amd64

package ring

// readTicks is nil: the writers of this architecture time calls by
// runtime.nanotime only.
var readTicks func() uint64
