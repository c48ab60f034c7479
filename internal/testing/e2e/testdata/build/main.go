// Command build is the fixture of the build-correctness tests: a main
// package and a library package that rules files select functions from. It
// imports nothing but its own package, so that the tests that must rebuild
// the standard library (a private GOCACHE, a new rules file) stay fast.
package main

import "example.com/build/shop"

func main() {
	c := &shop.Cart{}
	for i := 1; i <= 3; i++ {
		c.Add(shop.Price(i * 100))
	}
	println("total", c.Total(), "discounted", shop.Discount(c.Total(), 10), "checksum", shop.Checksum(1000))
}
