// Package calc is the second module's package that rules select.
package calc

// Sum adds its arguments.
func Sum(xs ...int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

// Scale multiplies.
type Scale struct{ By int }

// Apply returns x scaled.
func (s Scale) Apply(x int) int { return x * s.By }
