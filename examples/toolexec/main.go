// Command toolexec is a small cache service with no probe code at all: its
// probes come from rules.yml when it is built with usdt-toolexec.
//
//	go build -toolexec="usdt-toolexec -rules rules.yml" -o cache .
//	usdt-toolexec bt ./cache > cache.bt
//	sudo bpftrace cache.bt -c './cache -ops 2000'
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// Cache is a map with an expiry per entry.
type Cache struct {
	mu      sync.Mutex
	entries map[string]entry
}

type entry struct {
	value   []byte
	expires time.Time
}

var errMiss = errors.New("cache miss")

// Get returns the value of key, or errMiss.
func (c *Cache) Get(key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || time.Now().After(e.expires) {
		return nil, errMiss
	}
	return e.value, nil
}

// Put stores value under key for ttl.
func (c *Cache) Put(key string, value []byte, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[key] = entry{value: value, expires: time.Now().Add(ttl)}
}

// String is excluded by rules.yml: it is called too often to be worth it.
func (c *Cache) String() string { return fmt.Sprintf("cache(%d)", len(c.entries)) }

// load stands for a slow backend.
func load(key string) ([]byte, error) {
	time.Sleep(time.Duration(200+rand.IntN(800)) * time.Microsecond)
	return []byte("value of " + key), nil
}

func fetch(c *Cache, key string) ([]byte, error) {
	if v, err := c.Get(key); err == nil {
		return v, nil
	}
	v, err := load(key)
	if err != nil {
		return nil, err
	}
	c.Put(key, v, 50*time.Millisecond)
	return v, nil
}

func main() {
	ops := flag.Int("ops", 1000, "lookups to run")
	workers := flag.Int("workers", 8, "goroutines doing lookups")
	flag.Parse()
	c := &Cache{entries: map[string]entry{}}
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range *ops / *workers {
				if _, err := fetch(c, fmt.Sprintf("key%d", rand.IntN(50))); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr, c)
}
