// Package util has the same name as the other fixture package util, under
// another import path.
package util

// Join joins two strings with a separator of its own.
func Join(x, y string) string { return x + "b" + y }

// Sep is a separator.
type Sep string

// Between puts s between x and y.
func (s Sep) Between(x, y string) string { return x + string(s) + y }
