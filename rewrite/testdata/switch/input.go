package shop

type Cart struct{ items []string }

// Add is a method on a pointer: its copy is (*Cart).usdtSwitched_Add.
func (c *Cart) Add(item string, _ int) (int, bool) {
	if item == "" {
		return 0, false
	}
	c.items = append(c.items, item)
	return len(c.items), true
}

// Len is a method on a value, with an unnamed result.
func (c Cart) Len() int { return len(c.items) }

// Total has a closure.
func Total(prices []int) (sum int) {
	add := func(p int) { sum += p }
	for _, p := range prices {
		add(p)
	}
	return sum
}

// Fee has parameters without names.
func Fee(int, string) int { return 1 }

//go:noinline
func Discount(sum int) int { return sum - sum/10 }

// Checkout keeps its probes spliced in: its rule says sites: code.
func Checkout(c *Cart) int { return c.Len() }

// Safe calls recover, which its copy could not: it is probed as sites:
// code probes it.
func Safe(f func()) (panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	f()
	return false
}

// Max is generic: probed as sites: code probes it.
func Max[T int | float64](a, b T) T {
	if a > b {
		return a
	}
	return b
}

// Taken's copy would have the name of this variable: probed as sites:
// code probes it.
func Taken() int { return usdtSwitched_Taken }

var usdtSwitched_Taken = 3

// First and first differ in case only, and so do their copies'
// names, usdtSwitched_First and usdtSwitched_first: each has its own.
func (c *Cart) First() string { return c.first() }

func (c *Cart) first() string { return c.items[0] }
