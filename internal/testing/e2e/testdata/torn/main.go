// Command torn races: one goroutine switches a struct's string and slice
// fields between a short value and a 1 MB one while another passes the
// struct, copied without synchronization, to a probed function that
// reads only the lengths. The copies can tear: a short value's pointer
// with a long value's length. The short values end their page, and the
// next page is PROT_NONE, so a probe that trusts a torn length faults. A
// probe must neither fault nor read past its bound, whatever the header
// says. Not built with -race: the race is the point.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"
)

type item struct {
	id   int
	name string
	data []byte
}

var shared item

//go:noinline
func use(x item) int { return x.id + len(x.name) + len(x.data) }

func main() {
	calls, _ := strconv.Atoi(os.Args[1])
	short, long := pageEnd("short"), strings.Repeat("L", 1<<20)
	tiny := pageEnd("tiny")
	shortData, longData := unsafe.Slice(unsafe.StringData(tiny), len(tiny)), bytes.Repeat([]byte("B"), 1<<20)
	var stop atomic.Bool
	done := make(chan bool)
	go func() {
		for i := 0; !stop.Load(); i++ {
			if i&1 == 0 {
				shared.name, shared.data = short, shortData
			} else {
				shared.name, shared.data = long, longData
			}
		}
		close(done)
	}()
	var sum int
	for range calls {
		sum += use(shared) & 1
	}
	stop.Store(true)
	<-done
	fmt.Println("calls", calls, "sum>=0", sum >= 0)
}

// pageEnd returns s copied to the end of a page that a PROT_NONE page
// follows.
func pageEnd(s string) string {
	size := os.Getpagesize()
	m, err := syscall.Mmap(-1, 0, 2*size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	if err := syscall.Mprotect(m[size:], syscall.PROT_NONE); err != nil {
		panic(err)
	}
	at := m[size-len(s) : size]
	copy(at, s)
	return unsafe.String(&at[0], len(s))
}
