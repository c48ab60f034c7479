package runtime

import (
	goruntime "runtime"
	"sync"
)

// stackBufs holds buffers for stackGoid: runtime.Stack makes its buffer
// escape, and a pool keeps the slow path from allocating on every call.
var stackBufs = sync.Pool{New: func() any { return new([64]byte) }}

// stackGoid is the slow but version-proof way to learn the current
// goroutine's id: the runtime's own traceback header. It returns 0, which no
// user goroutine has, if the header cannot be parsed.
func stackGoid() int64 {
	b := stackBufs.Get().(*[64]byte)
	n := goruntime.Stack(b[:], false)
	id, _ := parseGoroutineHeader(b[:n])
	stackBufs.Put(b)
	return id
}

// parseGoroutineHeader extracts the id from the first line of a goroutine
// traceback, "goroutine 7 [running]:" (or "goroutine 7 gp=... [running]:"
// with GOTRACEBACK=system). Parsing by hand keeps strconv's error values, and
// their allocations, out of the picture.
func parseGoroutineHeader(b []byte) (int64, bool) {
	const prefix = "goroutine "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0, false
	}
	b = b[len(prefix):]
	var id int64
	i := 0
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		if id > (1<<63-1)/10 {
			return 0, false
		}
		id = id*10 + int64(b[i]-'0')
		if id < 0 {
			return 0, false
		}
	}
	// The id must be followed by a space; anything else means the buffer
	// was cut short or the format changed, and a partial number is wrong.
	if i == 0 || i == len(b) || b[i] != ' ' || id == 0 {
		return 0, false
	}
	return id, true
}
