// Command provider is a small job queue instrumented with usdtgen probes:
// see jobs.d for the probes and *.bt for bpftrace scripts that read them.
//
//	go build -toolexec=usdt-toolexec -o jobs ./examples/provider
//	sudo bpftrace latency.bt -c './jobs -jobs 200'
package main

//go:generate go run github.com/go-usdt/usdt/cmd/usdtgen jobs.d

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"

	usdtrt "github.com/go-usdt/usdt/runtime"
)

type job struct {
	id       int64
	kind     string
	enqueued time.Time
}

var kinds = []string{"resize", "thumbnail", "transcode", "checksum"}

func main() {
	jobs := flag.Int("jobs", 100, "jobs to run; 0 runs until killed")
	workers := flag.Int("workers", 4, "worker goroutines")
	every := flag.Duration("every", 5*time.Millisecond, "time between two enqueued jobs")
	addr := flag.String("http", "", "serve the probe list at http://ADDR/debug/usdt")
	flag.Parse()

	if *addr != "" {
		http.HandleFunc("/debug/usdt", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			usdtrt.WriteText(w)
		})
		go func() { log.Fatal(http.ListenAndServe(*addr, nil)) }()
	}

	queue := make(chan job, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				if !work(j, uint16(w)) {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for id := int64(1); *jobs == 0 || id <= int64(*jobs); id++ {
		j := job{id: id, kind: kinds[rand.IntN(len(kinds))], enqueued: time.Now()}
		queue <- j
		JobsJobEnqueued(j.id, j.kind, int32(len(queue)))
		time.Sleep(*every)
	}
	close(queue)
	wg.Wait()
	fmt.Fprintf(os.Stderr, "ran %d jobs, %d failed\n", *jobs, failed)
}

func work(j job, worker uint16) bool {
	start := time.Now()
	JobsJobStarted(j.id, j.kind, worker, start.Sub(j.enqueued).Nanoseconds())
	time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
	ok := rand.IntN(10) != 0
	JobsJobDone(j.id, j.kind, time.Since(start).Nanoseconds(), ok)
	return ok
}
