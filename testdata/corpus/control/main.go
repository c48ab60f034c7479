// Command control uses labels, goto and select, runs goroutines that move
// between threads, recurses deep enough to grow its stack many times, and
// passes more parameters and results than a probe holds.
package main

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"
)

func labels(n int) (found []int) {
outer:
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			switch {
			case j > i:
				continue outer
			case i*j == 6:
				found = append(found, i, j)
				break outer
			}
		}
	}
	i := 0
loop:
	if i < 3 {
		i++
		goto loop
	}
	return append(found, i)
}

func choose(a, b chan int, quit chan struct{}) (got []int) {
	for {
		select {
		case v := <-a:
			got = append(got, v)
		case v, ok := <-b:
			if !ok {
				b = nil
				continue
			}
			got = append(got, -v)
		case <-quit:
			sort.Ints(got)
			return got
		}
	}
}

func hop(id int, rounds int) (sum int) {
	for r := 0; r < rounds; r++ {
		sum += id * r
		if r%7 == 0 {
			runtime.Gosched()
		}
		if r%50 == 0 {
			time.Sleep(time.Microsecond)
		}
	}
	return sum
}

type frame struct{ pad [64]int }

func deep(n int, f frame) int {
	if n == 0 {
		return f.pad[0]
	}
	f.pad[n%64] = n
	return deep(n-1, f) + f.pad[n%64]%3
}

func many(a, b, c, d, e, f, g, h, i, j, k, l, m int8, s string) (r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13 int, rs string) {
	return int(a), int(b), int(c), int(d), int(e), int(f), int(g), int(h), int(i), int(j), int(k), int(l), int(m), s + "!"
}

func main() {
	fmt.Println(labels(5))
	a, b, quit := make(chan int), make(chan int), make(chan struct{})
	done := make(chan []int)
	go func() { done <- choose(a, b, quit) }()
	for i := 1; i <= 5; i++ {
		a <- i
		b <- i * 10
	}
	close(b)
	close(quit)
	fmt.Println(<-done)

	var wg sync.WaitGroup
	sums := make([]int, 8)
	for g := range sums {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			sums[g] = hop(g, 400)
		}(g)
	}
	wg.Wait()
	fmt.Println(sums)

	fmt.Println(deep(20000, frame{}))
	fmt.Println(many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "many"))
}
