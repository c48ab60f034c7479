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
	m, err := syscall.Mmap(-1, 0, os.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	copy(m, "hello, unmapped world")
	b := m[:100]
	s := unsafe.String(&m[0], 21)
	r := (*rec)(unsafe.Pointer(&m[256]))
	x := box{n: 7, name: unsafe.String(&m[512], 40), data: m[1024:2048]}
	var e error = (*failure)(unsafe.Pointer(&m[3072]))
	if err := syscall.Munmap(m); err != nil {
		panic(err)
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
