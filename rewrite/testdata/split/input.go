// Package shop is the input of rewrite's golden test: every kind of
// function the rules select, tiny ones (split into an untraced body and a
// traced copy) and larger ones (probes and a deferred call in place).
package shop

// Add is tiny: split, and it stays inlinable.
func Add(a, b int) int { return a + b }

// Cents has methods with value and pointer receivers.
type Cents int64

// Minus has a value receiver.
func (c Cents) Minus(d Cents) Cents { return c - d }

// Reset has a blank receiver name and a blank parameter, no results.
func (_ *Cents) Reset(_ int) {}

// Pair returns a lone unnamed result of a generic type parameter.
func Pair[K comparable, V any](k K, v V) V { return v }

// Box is generic; Get has a pointer receiver.
type Box[T any] struct{ v T }

func (b *Box[T]) Get() T { return b.v }

// Count is variadic.
func Count(prefix string, xs ...int) int { return len(xs) }

// Sum is too large to split.
func Sum(xs []int) (total int) {
	for _, x := range xs {
		if x > 0 {
			total += x
		} else {
			total -= x
		}
	}
	return total
}

// Local declares a type: its two copies would be two types.
func Local() any {
	type t struct{}
	return t{}
}

// Quick keeps its directive out of the traced copy.
//
//go:noinline
func Quick() bool { return true }

// Racy carries a directive the traced copy needs too.
//
//go:norace
func Racy(p *int) { *p++ }

// Blank has a blank type parameter, which a call cannot name.
func Blank[_ any]() int { return 1 }

// Taken is tiny, but the package already has a Taken_usdtTraced.
func Taken() int { return 2 }

func Taken_usdtTraced() int { return 3 }

// Ping has entry probes only (see rules.yml): nothing to split.
func Ping(n int) int { return n }

// Pong has exit probes only.
func Pong(n int) (m int) { return n + 1 }

// Sign leaves in three places, all turned into jumps to one return.
func Sign(x int) (int, string) {
	if x < 0 {
		return -1, "negative"
	} else if x == 0 {
		return 0, "zero"
	}
	return 1, "positive"
}

// Clamp has named results and a bare return among others.
func Clamp(lo, hi, x int) (y int, clamped bool) {
	switch {
	case x < lo:
		return lo, true
	case x > hi:
		y, clamped = hi, true
		return
	}
	y = x
	return y, func() bool { return false }()
}

// Skip has no results: its early return and the end of its body.
func Skip(xs []int) {
	for _, x := range xs {
		if x < 0 {
			return
		}
		Sum(xs)
	}
}

// Deferred keeps its returns: a panic in its deferred call would show
// the line it returned at.
func Deferred(xs []int) int {
	defer Skip(nil)
	for i, x := range xs {
		if x < 0 {
			return i
		}
	}
	return len(xs)
}

// Shadowed keeps its returns: in the loop, y is another variable.
func Shadowed(xs []int) (y int) {
	for _, x := range xs {
		if y := x * 2; y > 10 {
			return y
		}
	}
	return len(xs)
}

// Switched keeps its returns: in each clause, y is the clause's own
// variable.
func Switched(v any) (y int) {
	switch y := v.(type) {
	case string:
		return len(y)
	case int:
		return y + 1
	}
	return -1
}

// Reused keeps its returns: its := assigns the parameter n, which it
// would declare anew in a block.
func Reused(s string, n int) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := len(s)+n, error(nil)
	if n > 10 {
		return n, err
	}
	return -n, err
}

// Blanks gives its blank result a name to assign it, and jumps.
func Blanks(xs []int) (_ int, ok bool) {
	for _, x := range xs {
		if x < 0 {
			return x, false
		}
	}
	return len(xs), true
}

// FastSign fires its exit probe at its one return (unwind: false): no
// deferred call.
func FastSign(x int) (int, string) {
	if x < 0 {
		return -1, "negative"
	}
	return 1, "positive"
}

// FastDouble is tiny: its traced copy fires at the return.
func FastDouble(a int) int { return a * 2 }

// FastWalk has no results and no return: it fires at the end of its body.
func FastWalk(xs []int) {
	for i := range xs {
		xs[i]++
		Sum(xs)
	}
}

// FastCleanup has a defer of its own: it keeps the deferred exit call.
func FastCleanup(xs []int) int {
	defer Skip(nil)
	if len(xs) == 0 {
		return 0
	}
	return len(xs)
}

// FastForever never returns: only a panic leaves it, which a deferred
// call sees.
func FastForever(ch chan int) int {
	for {
		if v := <-ch; v < 0 {
			panic(v)
		}
	}
}

// Evens returns a slice, which its deferred exit probe reads through the
// result's address.
func Evens(xs []int) (evens []int) {
	for _, x := range xs {
		if x%2 == 0 {
			evens = append(evens, x)
		}
	}
	return evens
}

// FastTail's exit probe, at the return, passes the address of a copy of
// the slice it returns.
func FastTail(b []byte) []byte { return b[1:] }
