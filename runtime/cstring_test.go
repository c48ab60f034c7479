package runtime

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/go-usdt/usdt/internal/probe"
)

// TestCStringMax: the tracer reads as many bytes of a string as usdtgen's
// probes pass.
func TestCStringMax(t *testing.T) {
	if CStringMax != probe.CStringMax {
		t.Errorf("runtime.CStringMax = %d, probe.CStringMax = %d", CStringMax, probe.CStringMax)
	}
}

func TestCStringSet(t *testing.T) {
	long := strings.Repeat("abcdefghij", 30) // 300 bytes
	tests := []struct {
		name string
		in   string
		want string // bytes before the terminating NUL
	}{
		{"empty", "", ""},
		{"ascii", "hello, world", "hello, world"},
		{"utf8", "héllo, 世界 🌍", "héllo, 世界 🌍"},
		{"exactly max", long[:CStringMax], long[:CStringMax]},
		{"one less than max", long[:CStringMax-1], long[:CStringMax-1]},
		{"one more than max", long[:CStringMax+1], long[:CStringMax]},
		{"300 bytes", long, long[:CStringMax]},
		{"interior NUL", "ab\x00cd", "ab\x00cd"},
		{"utf8 cut at limit", strings.Repeat("a", CStringMax-1) + "é", strings.Repeat("a", CStringMax-1) + "\xc3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c CString
			// Dirty the buffer so a missing terminator would show.
			for i := range c {
				c[i] = 'x'
			}
			p := c.Set(tt.in)
			if p != &c[0] {
				t.Fatalf("Set returned %p, want &c[0] = %p", p, &c[0])
			}
			n := len(tt.want)
			if got := string(c[:n]); got != tt.want {
				t.Errorf("copied %q, want %q", got, tt.want)
			}
			if c[n] != 0 {
				t.Errorf("c[%d] = %#x, want NUL terminator", n, c[n])
			}
			// What a C reader sees: everything up to the first NUL.
			cstr := unsafe.Slice(p, len(c))
			wantC, _, _ := strings.Cut(tt.want, "\x00")
			if i := bytes.IndexByte(cstr, 0); string(cstr[:i]) != wantC {
				t.Errorf("C string %q, want %q", cstr[:i], wantC)
			}
		})
	}
}

func TestCStringSetReuse(t *testing.T) {
	var c CString
	c.Set("a much longer string")
	c.Set("short")
	if got := unsafe.String(&c[0], bytes.IndexByte(c[:], 0)); got != "short" {
		t.Errorf("after reuse: %q, want %q", got, "short")
	}
}

var sinkByte byte

func TestCStringSetNoAlloc(t *testing.T) {
	s := strings.Repeat("x", 300)
	allocs := testing.AllocsPerRun(1000, func() {
		var c CString
		p := c.Set(s)
		sinkByte = *p
	})
	if allocs != 0 {
		t.Errorf("Set allocates %v times per call, want 0", allocs)
	}
}

// TestCStringSetInlinable asks the compiler itself: fire functions rely on
// Set being inlined, and a harmless-looking edit can push it over the
// inlining budget.
func TestCStringSetInlinable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found:", err)
	}
	out, err := exec.Command(gocmd, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("can inline (*CString).Set")) {
		t.Errorf("(*CString).Set is not inlinable; compiler said:\n%s", out)
	}
}

func BenchmarkCStringSet(b *testing.B) {
	for _, n := range []int{8, 64, 300} {
		s := strings.Repeat("x", n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				var c CString
				sinkByte = *c.Set(s)
			}
		})
	}
}

// TestUnreadable: the text Set writes for bytes it cannot read is the one
// the tracer parses.
func TestUnreadable(t *testing.T) {
	if unreadable != probe.Unreadable {
		t.Errorf("runtime's unreadable = %q, probe.Unreadable = %q", unreadable, probe.Unreadable)
	}
}

// TestCStringSetUnmapped: a string whose bytes the program unmapped is
// copied as the unreadable text with its address, where a plain copy
// would kill the program with "unexpected fault address"; the goroutine's
// panic-on-fault is left as it was, on or off, and the buffer serves
// again.
func TestCStringSetUnmapped(t *testing.T) {
	m, err := syscall.Mmap(-1, 0, os.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, "gone")
	s := unsafe.String(&m[0], 100)
	if err := syscall.Munmap(m); err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(unsafe.StringData(s))))
	want := fmt.Sprintf("%s%x>", probe.Unreadable, addr)
	for _, before := range []bool{false, true} {
		was := debug.SetPanicOnFault(before)
		var c CString
		p := c.Set(s)
		after := debug.SetPanicOnFault(was)
		got := unsafe.String(p, bytes.IndexByte(c[:], 0))
		if got != want {
			t.Errorf("panic on fault %v: Set = %q, want %q", before, got, want)
		}
		if a, ok := probe.ParseUnreadable(got); !ok || a != addr {
			t.Errorf("ParseUnreadable(%q) = %#x, %v; want %#x", got, a, ok, addr)
		}
		if after != before {
			t.Errorf("panic on fault %v before Set, %v after", before, after)
		}
		c.Set("again")
		if got := unsafe.String(&c[0], bytes.IndexByte(c[:], 0)); got != "again" {
			t.Errorf("after a fault: %q, want %q", got, "again")
		}
	}
}
