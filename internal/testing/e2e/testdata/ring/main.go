// Command ring makes a known number of calls of its probed functions, for
// the tests of the in-process ring transport:
//
//	ring [-g N] [-wait] [-procs] [-nap D] [-then M] CALLS
//
// Each of N goroutines calls add CALLS times, and wide and note (a
// string) CALLS/100 times; ring then prints "add=A wide=W" with the
// totals. -wait prints "ready"
// and waits for a line on stdin before the calls, for a tracer to attach.
// -procs changes GOMAXPROCS every 1,000 calls, between 1 and twice the
// CPUs. -nap has each goroutine call nap, which sleeps D, after its calls,
// and ring prints " napped=NS" after the totals: how long the calls of
// nap took in all, as ring timed them.
// With CALLS 0, the goroutines call add until stdin has a line.
// -then M, after the totals, waits for another line on stdin, then has
// each goroutine call add M times more (and nap), and prints the totals
// of those calls alone.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

//go:noinline
func add(a, b int) int { return a + b }

//go:noinline
func wide(a, b, c, d, e, f, g, h, i, j int) int { return a + b + c + d + e + f + g + h + i + j }

//go:noinline
func note(s string) int { return len(s) }

// nap returns a string so that its exit probe copies it: the fire
// function, not the clock's trampoline, times such a call, from a start
// that a ring trace counting by the time-stamp counter read in ticks.
//
//go:noinline
func nap(d time.Duration) string {
	time.Sleep(d)
	return "slept"
}

var adds, wides, napped atomic.Int64

func work(calls int, procs bool, stop *atomic.Bool) int {
	s, n := 0, 0
	for i := 0; calls == 0 && !stop.Load() || i < calls; i++ {
		s += add(i, 1)
		n++
		if i%100 == 0 {
			s += wide(1, 2, 3, 4, 5, 6, 7, 8, 9, i)
			s += note("w" + strconv.Itoa(i))
			wides.Add(1)
		}
		if procs && i%1000 == 999 {
			if runtime.GOMAXPROCS(0) == 1 {
				runtime.GOMAXPROCS(2 * runtime.NumCPU())
			} else {
				runtime.GOMAXPROCS(1)
			}
		}
	}
	adds.Add(int64(n))
	return s
}

func main() {
	goroutines := flag.Int("g", 1, "goroutines")
	wait := flag.Bool("wait", false, "wait for a line on stdin")
	procs := flag.Bool("procs", false, "change GOMAXPROCS")
	sleep := flag.Duration("nap", 0, "call nap, which sleeps this long, after the calls")
	then := flag.Int("then", 0, "after the totals, wait for a line and call this many times more")
	flag.Parse()
	calls, err := strconv.Atoi(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: ring [-g N] [-wait] [-procs] [-nap D] [-then M] CALLS")
		os.Exit(2)
	}
	in := bufio.NewReader(os.Stdin)
	if *wait {
		fmt.Println("ready")
		in.ReadString('\n')
	}
	var stop atomic.Bool
	if calls == 0 {
		go func() {
			in.ReadString('\n')
			stop.Store(true)
		}()
	}
	round(calls, *goroutines, *procs, *sleep, &stop)
	if *then > 0 {
		in.ReadString('\n')
		adds.Store(0)
		wides.Store(0)
		napped.Store(0)
		round(*then, *goroutines, *procs, *sleep, &stop)
	}
}

// round has each of goroutines goroutines make calls calls (until stop,
// with calls 0), then nap, and prints the totals.
func round(calls, goroutines int, procs bool, sleep time.Duration, stop *atomic.Bool) {
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			work(calls, procs && g == 0, stop)
			if sleep > 0 {
				start := time.Now()
				nap(sleep)
				napped.Add(int64(time.Since(start)))
			}
		})
	}
	wg.Wait()
	fmt.Printf("add=%d wide=%d", adds.Load(), wides.Load())
	if sleep > 0 {
		fmt.Printf(" napped=%d", napped.Load())
	}
	fmt.Println()
}
