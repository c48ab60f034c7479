// Command hop runs 50 goroutines that each call hop 20 times, while their
// goroutines move between threads: half the goroutines are locked to their
// thread, the others yield, and every call blocks in a syscall, which hands
// its thread's P to another thread. It prints each worker's goroutine id.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const (
	workers = 50
	rounds  = 20
)

// goid is the running goroutine's id, as stack traces show it.
func goid() uint64 {
	var buf [64]byte
	f := strings.Fields(string(buf[:runtime.Stack(buf[:], false)]))
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// hop returns worker*1000+round after yielding and sleeping 200µs in
// nanosleep, a blocking syscall.
func hop(gid uint64, worker, round int) int {
	if worker%2 == 1 {
		runtime.Gosched()
	}
	ts := syscall.Timespec{Nsec: 200_000}
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
	runtime.Gosched()
	return worker*1000 + round
}

func main() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w%2 == 0 {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			g := goid()
			mu.Lock()
			fmt.Fprintf(os.Stderr, "worker %d g=%d\n", w, g)
			mu.Unlock()
			for r := range rounds {
				if got := hop(g, w, r); got != w*1000+r {
					panic(fmt.Sprintf("hop(%d, %d) = %d", w, r, got))
				}
			}
		}()
	}
	wg.Wait()
}
