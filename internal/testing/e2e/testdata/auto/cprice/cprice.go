// Package cprice computes prices in C: a cgo package whose Go functions
// are instrumented.
package cprice

/*
static long long scale(long long cents, int percent) { return cents * percent / 100; }
*/
import "C"

// Scale returns percent % of cents, computed by C.
func Scale(cents int64, percent int32) int64 {
	return int64(C.scale(C.longlong(cents), C.int(percent)))
}

// Label names an amount.
func Label(cents int64, currency string) string {
	return currency + " " + string(rune('0'+cents%10))
}
