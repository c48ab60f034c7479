// Command shop serves requests on three goroutines, three each; a request
// calls three functions, the first of which fails for salt, which the
// store does not have (then price is not called). The store's usdtgen
// probes fire inside a traced call (stock__checked, in Get) and outside
// any (opened, in main).
package main

//go:generate usdtgen store.d

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

type Store struct{ stock map[string]int }

// Get fires its probe before it blocks: a usdtgen probe's event belongs
// to the call open on its thread, which the goroutine may leave when it
// blocks.
func (s *Store) Get(item string) (int, error) {
	n, ok := s.stock[item]
	StoreStockChecked(item, int32(n))
	time.Sleep(time.Millisecond)
	if !ok {
		return 0, errors.New("no " + item)
	}
	return n, nil
}

func price(qty int) int {
	time.Sleep(2 * time.Millisecond)
	return qty * 250
}

func audit(req int, ok bool) bool {
	time.Sleep(500 * time.Microsecond)
	return ok
}

func handle(req int, item string) (int, error) {
	n, err := (&Store{stock: map[string]int{"tea": 3, "rice": 5}}).Get(item)
	audit(req, err == nil)
	if err != nil {
		return 0, err
	}
	return price(n), nil
}

func main() {
	const workers = 3
	StoreOpened(workers)
	items := []string{"tea", "rice", "salt"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 {
				req := 10*w + i
				total, err := handle(req, items[(w+i)%len(items)])
				fmt.Println("request", req, total, err)
			}
		}()
	}
	wg.Wait()
}
