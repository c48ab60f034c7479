package runtime

import "unsafe"

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
// The function that fires the probe need never read s's bytes itself: they
// may be memory the program has unmapped (a slice of an mmap'd file turned
// into a string) or freed (C memory), or a data race may have torn s's
// header. A probe must not fault where the program would not, so a fault
// while copying is a panic that Set recovers, and the copy then holds
// "<unreadable 0xADDRESS>", s's address in hex, which usdt-toolexec trace
// shows as unreadable.
func (c *CString) Set(s string) (p *byte) {
	p = &c[0]
	defer c.fault(unsafe.StringData(s), setPanicOnFault(true))
	n := copy(c[:CStringMax], s)
	c[n] = 0
	return p
}

// unreadable is internal/probe's Unreadable, written out (TestUnreadable
// keeps the two equal).
const unreadable = "<unreadable 0x"

// fault ends Set: it puts the goroutine's panic-on-fault back as it was
// and, when the copy faulted, writes the unreadable text instead.
func (c *CString) fault(at *byte, was bool) {
	setPanicOnFault(was)
	if recover() == nil {
		return
	}
	addr := uintptr(unsafe.Pointer(at))
	n := copy(c[:], unreadable)
	digits := 1
	for v := addr >> 4; v != 0; v >>= 4 {
		digits++
	}
	for k := digits - 1; k >= 0; k-- {
		c[n+k] = "0123456789abcdef"[addr&15]
		addr >>= 4
	}
	n += digits
	c[n] = '>'
	c[n+1] = 0
}

// setPanicOnFault is runtime/debug.SetPanicOnFault, which the Go runtime
// offers to linkname; importing runtime/debug would link more into every
// program with probes.
//
//go:linkname setPanicOnFault runtime/debug.setPanicOnFault
func setPanicOnFault(bool) bool
