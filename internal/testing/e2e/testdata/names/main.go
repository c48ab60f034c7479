// Command names calls one function of each way Go names (or does not
// name) a receiver, parameter or result, once each, for the end-to-end
// tests of argument names in probe tables.
package main

import (
	"errors"
	"fmt"
	"os"
)

// Cache has a named receiver, parameter and results.
type Cache struct{ m map[string]string }

func (c *Cache) Get(key string) (val string, ok bool) {
	val, ok = c.m[key]
	return val, ok
}

// blank has a blank parameter and an unnamed result.
func blank(_ int, label string) int { return len(label) }

// unnamed names nothing.
func unnamed(int, string) (int, error) { return 0, errors.New("unnamed") }

// wide has more parameters than the entry probe's eleven value arguments.
func wide(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13 int) int {
	return a1 + a13
}

func main() {
	c := &Cache{m: map[string]string{"k17": "v17"}}
	v, ok := c.Get("k17")
	_, err := unnamed(3, "x")
	fmt.Fprintln(os.Stderr, v, ok, blank(1, "abc"), err, wide(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13))
}
