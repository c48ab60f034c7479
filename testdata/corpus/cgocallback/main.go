// Command cgocallback calls C, which calls back into instrumented Go
// functions, from the main goroutine and from other goroutines.
package main

/*
#include <stdint.h>
extern int64_t goAdd(int64_t, int64_t);
extern void goNote(char*);
static int64_t twice_through_go(int64_t a) {
	goNote("from C");
	return goAdd(a, a);
}
*/
import "C"

import (
	"fmt"
	"sort"
	"sync"
)

var mu sync.Mutex
var notes []string

//export goAdd
func goAdd(a, b C.int64_t) C.int64_t { return a + b }

//export goNote
func goNote(s *C.char) {
	mu.Lock()
	defer mu.Unlock()
	notes = append(notes, C.GoString(s))
}

func viaC(n int) int64 { return int64(C.twice_through_go(C.int64_t(n))) }

func main() {
	fmt.Println(viaC(21))
	var wg sync.WaitGroup
	res := make([]int64, 4)
	for i := range res {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res[i] = viaC(i)
		}(i)
	}
	wg.Wait()
	sort.Slice(res, func(i, j int) bool { return res[i] < res[j] })
	fmt.Println(res, len(notes))
}
