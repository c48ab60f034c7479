// Command fire calls one probed thing N times in a loop and prints the
// loop's time, for scripts/bench-fire.sh:
//
//	fire -mode gen -n N    the usdtgen probe fire:tick
//	fire -mode gen -n N -rate R
//	                       the same, R fires per second at most (for
//	                       scripts/bench-trace.sh)
//	fire -mode call -n N   small, a tiny function with automatic probes
//	fire -mode lone -n N   lone, the same function with an entry probe only
//	fire -mode get -n N    Cache.Get on a hit
//	fire -mode pair -n N   pair, a tiny function of two ints with automatic
//	                       probes (for scripts/bench-ring.sh)
//	fire -mode still -n N  still, small kept out of line, whose probes are
//	                       notes on its own code (rules-notes.yml)
//	fire -mode framed -n N framed, which calls still and so has a frame and
//	                       Go's stack check, built with a traced copy
//	                       (rules-switch.yml)
//	fire -windows ...      prints "ready", then times the loop again for
//	                       each line on stdin, until its end, N iterations
//	                       or the number on the line (for
//	                       scripts/bench-killed.sh)
//
// Cache and its Get are examples/toolexec's: scripts/bench-fire.sh copies
// them from there into cache.go, so that the benchmark times a traced Get
// without the example's sleeping backend.
package main

//go:generate usdtgen fire.d

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

func small(i int) int { return i*3 + 1 }

func lone(i int) int { return i*3 + 1 }

func pair(a, b int) int { return a*3 + b }

// still is small, which the compiler would inline, kept a call: a probe
// that is only a note fires where the function's own code runs.
//
//go:noinline
func still(i int) int { return i*3 + 1 }

// framed calls still, and so starts with Go's stack check, which
// sites: switch switches it through.
//
//go:noinline
func framed(i int) int { return still(i) + 1 }

func main() {
	mode := flag.String("mode", "call", "gen, call, lone, get, pair, still or framed")
	n := flag.Int("n", 100000, "iterations")
	rate := flag.Int("rate", 0, "gen mode: fires per second at most, 0 for no limit")
	windows := flag.Bool("windows", false, "print ready, then time the loop for each line on stdin")
	flag.Parse()
	c := &Cache{entries: map[string]entry{"k": {value: []byte("v"), expires: time.Now().Add(time.Hour)}}}
	if !*windows {
		loop(c, *mode, *n, *rate)
		return
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		calls, err := strconv.Atoi(in.Text())
		if err != nil {
			calls = *n
		}
		loop(c, *mode, calls, *rate)
	}
}

// loop calls what mode names n times and prints how long that took.
func loop(c *Cache, mode string, n, rate int) {
	s := 0
	t0 := time.Now()
	switch mode {
	case "gen":
		for i := 0; i < n; i++ {
			FireTick(int64(i))
			// Paced in steps of 100 fires, each due at its time since t0:
			// a slow stretch is caught up, not lost.
			if rate > 0 && i%100 == 99 {
				time.Sleep(time.Until(t0.Add(time.Duration(i+1) * time.Second / time.Duration(rate))))
			}
		}
	case "call":
		for i := 0; i < n; i++ {
			s += small(i)
		}
	case "lone":
		for i := 0; i < n; i++ {
			s += lone(i)
		}
	case "pair":
		for i := 0; i < n; i++ {
			s += pair(i, s)
		}
	case "still":
		for i := 0; i < n; i++ {
			s += still(i)
		}
	case "framed":
		for i := 0; i < n; i++ {
			s += framed(i)
		}
	case "get":
		for i := 0; i < n; i++ {
			v, _ := c.Get("k")
			s += len(v)
		}
	default:
		fmt.Fprintln(os.Stderr, "fire: unknown mode", mode)
		os.Exit(2)
	}
	fmt.Printf("loop_ns %d\n", time.Since(t0).Nanoseconds())
	if s == 42 {
		fmt.Println()
	}
}
