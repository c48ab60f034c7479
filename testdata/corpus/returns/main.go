// Command returns leaves functions every way Go allows: many returns, bare
// ones, returns whose results call functions that change named results,
// returns out of select, labeled loops and goto, returns in closures, and
// returns in functions whose top level reuses a parameter with := or whose
// blocks or type switches shadow a result. Instrumented, such functions
// leave through one return, where that keeps their meaning.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// month has more returns than Go open-codes a deferred call for.
func month(n int) string {
	switch n {
	case 1:
		return "Jan"
	case 2:
		return "Feb"
	case 3:
		return "Mar"
	case 4:
		return "Apr"
	case 5:
		return "May"
	case 6:
		return "Jun"
	case 7:
		return "Jul"
	case 8:
		return "Aug"
	case 9:
		return "Sep"
	case 10:
		return "Oct"
	case 11:
		return "Nov"
	case 12:
		return "Dec"
	case 13, 14, 15:
		return strconv.Itoa(n) + "?"
	case 16:
		return ""
	}
	if n < 0 {
		return "negative"
	}
	return "many"
}

// bumped returns a named result next to a call that changes it: the
// order Go evaluates them in must stay the same.
func bumped(x int) (n int, s string) {
	n = x
	bump := func() string { n += 100; return "bumped" }
	if x > 5 {
		return n, bump()
	}
	if x > 2 {
		return n + 1, bump()
	}
	n, s = x*2, "doubled"
	return
}

func pair(a, b int) (int, error) {
	if b == 0 {
		return 0, errors.New("divide by zero")
	}
	return a / b, nil
}

// forwarded returns another function's results as they are.
func forwarded(a, b int) (int, error) {
	if a < 0 {
		return pair(-a, b)
	}
	return pair(a, b)
}

type box struct{ v int }

// nilError returns a nil pointer as an error, which is not a nil error.
func nilError(fail bool) error {
	var p *boxError
	if fail {
		return p
	}
	return nil
}

type boxError struct{}

func (*boxError) Error() string { return "box error" }

// first leaves from a select, a labeled loop and through goto.
func first(ch chan int, xs [][]int) (found int, where string) {
	select {
	case v := <-ch:
		return v, "channel"
	default:
	}
outer:
	for i, row := range xs {
		for _, x := range row {
			if x < 0 {
				continue outer
			}
			if x > 10 {
				found = x
				where = "row " + strconv.Itoa(i)
				return
			}
		}
	}
	i := 0
again:
	if i < len(xs) {
		i++
		goto again
	}
	return -1, "nowhere after " + strconv.Itoa(i)
}

// visit has no results: early returns and the end of its body.
func visit(xs []int, seen *[]int) {
	for _, x := range xs {
		if x == 0 {
			return
		}
		*seen = append(*seen, x)
	}
	if len(*seen) > 3 {
		return
	}
	*seen = append(*seen, -1)
}

// closures returns from itself and from the function literals it calls.
func closures(n int) int {
	sq := func(x int) int {
		if x < 0 {
			return -x * x
		}
		return x * x
	}
	if n > 100 {
		return sq(-n)
	}
	return sq(n) + func() int { return 1 }()
}

// reused reuses its parameter n with := at its top level.
func reused(s string, n int) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1, err
	}
	return n * 2, nil
}

// shadowed declares its result's name again in a block.
func shadowed(xs []int) (y int) {
	for _, x := range xs {
		if y := x * 2; y > 10 {
			return y
		}
		y += x
	}
	return y
}

// switched names its type switch's variable like its result: in each
// clause, y is the clause's own variable, not the result.
func switched(v any) (y int, ok bool) {
	switch y := v.(type) {
	case int:
		return y + 1, true
	}
	return -1, false
}

// measured does the same with clauses where y is not even an int.
func measured(v any) (y int) {
	switch y := v.(type) {
	case string:
		return len(y)
	case []int:
		return len(y) * 10
	}
	return -1
}

// at panics while evaluating what it returns.
func at(xs []int, i int) (int, bool) {
	if i < 0 {
		return 0, false
	}
	return xs[i], true
}

func maxOf[T int | float64](xs ...T) (m T, ok bool) {
	if len(xs) == 0 {
		return
	}
	m = xs[0]
	for _, x := range xs[1:] {
		if x > m {
			m = x
		}
	}
	return m, true
}

func (b *box) take(n int) (got int, left int) {
	if n > b.v {
		got, b.v = b.v, 0
		return got, 0
	}
	b.v -= n
	return n, b.v
}

func main() {
	for _, n := range []int{1, 7, 12, 14, 16, 17, -3} {
		fmt.Print(month(n), " ")
	}
	fmt.Println()
	for _, x := range []int{1, 3, 7} {
		n, s := bumped(x)
		fmt.Println("bumped", x, n, s)
	}
	for _, ab := range [][2]int{{7, 2}, {-9, 3}, {1, 0}} {
		q, err := forwarded(ab[0], ab[1])
		fmt.Println("forwarded", ab, q, err)
	}
	fmt.Println("nilError", nilError(false) == nil, nilError(true) == nil)
	ch := make(chan int, 1)
	ch <- 42
	fmt.Println(first(ch, nil))
	fmt.Println(first(ch, [][]int{{1, -2, 30}, {4, 50}}))
	fmt.Println(first(ch, [][]int{{1}, {2}}))
	var seen []int
	visit([]int{1, 2, 0, 3}, &seen)
	visit([]int{4, 5}, &seen)
	visit([]int{6}, &seen)
	fmt.Println("visit", seen)
	fmt.Println("closures", closures(3), closures(101))
	for _, s := range []string{"", "21", "x"} {
		fmt.Println(reused(s, 5))
	}
	fmt.Println("shadowed", shadowed([]int{1, 2, 3}), shadowed([]int{1, 9}))
	for _, v := range []any{42, "x"} {
		y, ok := switched(v)
		fmt.Println("switched", v, y, ok)
	}
	fmt.Println("measured", measured("four"), measured([]int{1, 2}), measured(3))
	fmt.Println(maxOf(3, 9, 4))
	fmt.Println(maxOf(2.5, -1.0))
	fmt.Println(maxOf[int]())
	b := &box{10}
	fmt.Println(b.take(4))
	fmt.Println(b.take(40))
	fmt.Println(at([]int{5}, 0))
	defer func() {
		fmt.Println("recovered:", recover())
		os.Exit(3)
	}()
	fmt.Println(at([]int{5}, 2))
}
