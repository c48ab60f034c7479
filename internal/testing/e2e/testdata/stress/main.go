// Command stress repeats one fixed computation, round after round, for a
// given time, under everything that moves a goroutine's stack or stops it
// at an arbitrary instruction: many goroutines, deep recursion with large
// frames (stack growth and shrinking), allocation and runtime.GC, tight
// loops without calls (asynchronous preemption), and CPU profiling
// (SIGPROF). Every function but main has automatic probes; round and step
// are usdtgen probes. It prints the computation's checksum, the same in
// every round or it exits with status 1, and the same traced or not.
//
//	stress -for 30s -cpuprofile FILE
package main

//go:generate usdtgen stress.d

import (
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"time"
)

const workers = 16

// frame is large enough that a deep recursion outgrows the initial stack
// many times over, and the GC shrinks it again between rounds.
type frame [64]uint64

func descend(depth int, acc uint64) uint64 {
	var f frame
	for i := range f {
		f[i] = acc + uint64(i*depth)
	}
	if depth == 0 {
		return mix(f[:])
	}
	return descend(depth-1, f[depth%len(f)]^acc) + f[0]
}

func mix(xs []uint64) uint64 {
	var h uint64 = 1469598103934665603
	for _, x := range xs {
		h = (h ^ x) * 1099511628211
	}
	return h
}

// spin has no calls in its loop: only asynchronous preemption stops it.
func spin(n int, seed uint64) uint64 {
	x := seed | 1
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// garbage allocates maps, slices and strings that die at once.
func garbage(n int, seed uint64) uint64 {
	m := make(map[string][]uint64, n)
	for i := 0; i < n; i++ {
		k := strconv.FormatUint(seed+uint64(i), 36)
		m[k] = append(m[k], seed*uint64(i), uint64(len(k)))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := fnv.New64a()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{byte(m[k][0]), byte(m[k][1])})
	}
	return h.Sum64()
}

// leaf is a small function called very often: most probe fires are its.
func leaf(a, b uint64) uint64 { return a*31 + b }

func recovered(i int) (r uint64) {
	defer func() {
		if e := recover(); e != nil {
			r = uint64(len(fmt.Sprint(e)))
		}
	}()
	if i%3 == 0 {
		panic(fmt.Sprintf("stress %d", i))
	}
	return uint64(i)
}

func work(w int, results chan<- uint64) {
	seed := uint64(w + 1)
	var sum uint64
	for i := 0; i < 200; i++ {
		StressStep(int32(w), int64(i))
		sum = leaf(sum, descend(100+(w*37+i)%400, seed+uint64(i)))
		sum = leaf(sum, spin(20000, sum))
		sum = leaf(sum, garbage(50, sum))
		sum = leaf(sum, recovered(i))
		for j := 0; j < 100; j++ {
			sum = leaf(sum, uint64(j))
		}
	}
	results <- sum
}

func round() uint64 {
	results := make(chan uint64, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w, results)
		}()
	}
	wg.Wait()
	close(results)
	var all []uint64
	for r := range results {
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return mix(all)
}

func main() {
	dur := flag.Duration("for", 0, "repeat rounds for at least this long")
	profile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	fmt.Println("started")
	start := time.Now()
	want := round()
	for n := int64(1); time.Since(start) < *dur; n++ {
		runtime.GC()
		got := round()
		StressRound(n, got)
		if got != want {
			fmt.Printf("round %d: checksum %x, want %x\n", n, got, want)
			os.Exit(1)
		}
	}
	fmt.Printf("checksum %x\n", want)
}
