// Package other has a package name no other package of the binary has.
package other

// Twice doubles n.
func Twice(n int) int { return 2 * n }
