// Command unmapped is a correct program that holds a slice, a string, a
// pointer, a struct's string and an error into memory it has unmapped,
// and goes on passing them to functions that read only their lengths and
// nil-ness. It must run the same traced: a probe must not fault where the
// program would not. It writes its results to the file its first
// argument names, and exits 3.
package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

type rec struct {
	id   int
	name string
}

type box struct {
	n    int
	name string
	data []byte
}

type failure struct{ code int }

func (f *failure) Error() string { return fmt.Sprint("failure ", f.code) }

// size reads nothing but the lengths.
//
//go:noinline
func size(b []byte, s string, r *rec) int { return len(b) + len(s) + int(uintptr(unsafe.Pointer(r))&0) }

// boxed reads the struct's own words, never its string's or slice's bytes.
//
//go:noinline
func boxed(x box) int { return x.n + len(x.name) + len(x.data) }

// failed says whether there is an error, and never calls it.
//
//go:noinline
func failed(err error) bool { return err != nil }

func main() {
	m, err := mmapLow(os.Getpagesize())
	if err != nil {
		panic(err)
	}
	copy(m, "hello, unmapped world")
	b := m[:100]
	s := unsafe.String(&m[0], 21)
	r := (*rec)(unsafe.Pointer(&m[256]))
	x := box{n: 7, name: unsafe.String(&m[512], 40), data: m[1024:2048]}
	var e error = (*failure)(unsafe.Pointer(&m[3072]))
	if _, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), 0); errno != 0 {
		panic(errno)
	}
	total, fails := 0, 0
	for range 5 {
		total += size(b, s, r) + boxed(x)
		if failed(e) {
			fails++
		}
	}
	out := fmt.Sprintf("total=%d fails=%d\n", total, fails)
	if err := os.WriteFile(os.Args[1], []byte(out), 0o644); err != nil {
		panic(err)
	}
	os.Exit(3)
}

// mmapLow maps n bytes at the first of a few addresses low in the address
// space, which stay unmapped once unmapped. The kernel places a mapping
// that names no address top-down, below the lowest one of that region:
// a page mapped there and unmapped leaves the place where the next
// mapping of any size ends (the Go runtime's own, made on any of its
// threads, or the [uprobes] page of a uprobe's first hit), and the
// program's slices then point into readable memory. That is the likely
// reason trace through BPF read zeros there, once, in the 6.1 arm64 guest
// (a failed read shows as unreadable; the page was not looked at).
func mmapLow(n int) ([]byte, error) {
	const fixedNoReplace = 0x100000 // MAP_FIXED_NOREPLACE, Linux 4.17+
	var last error
	for hint := uintptr(1) << 32; hint < 16<<32; hint += 1 << 32 {
		addr, _, errno := syscall.Syscall6(syscall.SYS_MMAP, hint, uintptr(n),
			syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE|fixedNoReplace, ^uintptr(0), 0)
		if errno != 0 {
			last = errno
			continue
		}
		if addr != hint {
			// A kernel that ignores the flag took it as a hint.
			syscall.Syscall(syscall.SYS_MUNMAP, addr, uintptr(n), 0)
			last = fmt.Errorf("mapped at %#x, not %#x", addr, hint)
			continue
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(addr)), n), nil
	}
	return nil, fmt.Errorf("no low address to map a page at: %v", last)
}
