// Package valueop is what the probes' writer knows of a plan of value
// reads (internal/values): where each read takes its source from, and
// how many a plan holds. The instrumenting code (asmgen, ringlayout)
// depends on this package and not on internal/values, whose decoding is
// the tracer's alone: a change to it leaves the wrapper's identity, and
// so every cached instrumented build, as it was.
package valueop

// From says where a read takes its source from.
type From uint8

const (
	FromNone  From = iota
	FromArg        // the address the argument holds
	FromPtr        // the pointer at Src in the value area
	FromSlice      // the pointer at Src, Max bytes at most but the length at Src+8 times Elem
)

const (
	// MaxOps is how many reads a plan holds at most.
	MaxOps = 32
	// AreaSize is the bytes of an event's value area, which the reads
	// fill.
	AreaSize = 2048
)
