// Package shop is what the build tests' rules files select functions from.
package shop

// Price is in cents.
type Price int

// Cart holds prices.
type Cart struct {
	items []Price
}

// Add puts a price in the cart.
func (c *Cart) Add(p Price) {
	c.items = append(c.items, p)
}

// Total is the sum of the cart's prices.
func (c *Cart) Total() Price {
	var t Price
	for _, p := range c.items {
		t += p
	}
	return t
}

// Discount takes pct percent off p.
func Discount(p Price, pct int) Price {
	return p - p*Price(pct)/100
}

// Checksum is the hot loop of the PGO profile.
func Checksum(n int) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < n; i++ {
		h = mix(h, uint64(i))
	}
	return h
}

func mix(h, v uint64) uint64 {
	h ^= v
	h *= 1099511628211
	return h
}
