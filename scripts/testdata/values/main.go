// Command values calls a function with a *http.Request argument, or the
// same request as an unsafe.Pointer (an event without values), -n times,
// and prints the loop's time: what scripts/bench-values.sh traces.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"
	"unsafe"
)

//go:noinline
func handle(r *http.Request) int { return len(r.Method) }

//go:noinline
func handleRaw(p unsafe.Pointer) int { return int(uintptr(p) & 1) }

func main() {
	mode := flag.String("mode", "req", "req: handle(*http.Request); raw: handleRaw(unsafe.Pointer)")
	n := flag.Int("n", 1000000, "calls")
	flag.Parse()
	r := httptest.NewRequest("GET", "/orders/42?full=1", nil)
	r.Header.Set("User-Agent", "bench")
	sum := 0
	t0 := time.Now()
	for range *n {
		if *mode == "req" {
			sum += handle(r)
		} else {
			sum += handleRaw(unsafe.Pointer(r))
		}
	}
	fmt.Printf("loop_ns %d\nsum %d\n", time.Since(t0).Nanoseconds(), sum)
}
