package runtime

// CStringMax is the longest string, in bytes, that a [CString] holds; longer
// strings are truncated. It bounds the stack space and copying time of a fire
// function; tracers truncate further anyway unless configured otherwise
// (bpftrace's str() reads 64 bytes by default).
//
// The rewriter and the tracer take the same number from internal/probe;
// this package writes it out rather than import that one, which would
// link fmt and regexp into every program with probes (TestCStringMax keeps
// the two equal).
const CStringMax = 256

// CString is a NUL-terminated copy of a Go string, for probe arguments that
// tracers read as C strings.
//
// Fire functions declare one as a local variable, so the copy lives on the
// caller's stack only while a probe is enabled and never allocates. The
// buffer must stay alive until the probe's NOP has executed, which a local
// variable of the fire function guarantees.
type CString [CStringMax + 1]byte

// Set copies at most [CStringMax] bytes of s into c, terminates the copy with
// NUL and returns a pointer to its first byte, ready to be passed as a probe
// argument.
//
// Truncation counts bytes, not runes: a multi-byte UTF-8 sequence straddling
// the limit is cut, which tracers print as an invalid byte rather than fail.
// A NUL inside s is copied as is, so C readers see the string end there; Go
// allows such strings, C cannot represent them.
//
// Set is small enough to be inlined, so that the only cost in a fire function
// is the copy itself.
func (c *CString) Set(s string) *byte {
	n := copy(c[:CStringMax], s)
	c[n] = 0
	return &c[0]
}
