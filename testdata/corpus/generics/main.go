// Command generics instantiates generic functions and methods, with
// interfaces among the type arguments, and calls closures that capture
// type parameters.
package main

import (
	"fmt"
	"sort"
	"strings"
)

type Number interface{ ~int | ~int64 | ~float64 }

func Sum[T Number](xs ...T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

func Map[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

type Stack[T any] struct{ items []T }

func (s *Stack[T]) Push(v T) { s.items = append(s.items, v) }

func (s *Stack[T]) Pop() (T, bool) {
	var zero T
	if len(s.items) == 0 {
		return zero, false
	}
	v := s.items[len(s.items)-1]
	s.items = s.items[:len(s.items)-1]
	return v, true
}

func (s Stack[T]) Len() int { return len(s.items) }

type Shape interface{ Area() float64 }

type Square float64

func (q Square) Area() float64 { return float64(q * q) }

type Circle struct{ R float64 }

func (c Circle) Area() float64 { return 3 * c.R * c.R }

func Largest[S Shape](shapes []S) S {
	var best S
	for i, s := range shapes {
		if i == 0 || s.Area() > best.Area() {
			best = s
		}
	}
	return best
}

func Counter[K comparable]() func(K) int {
	seen := map[K]int{}
	return func(k K) int { seen[k]++; return seen[k] }
}

type Pair[A, B any] struct {
	First  A
	Second B
}

func MakePair[A, B any](a A, b B) Pair[A, B] { return Pair[A, B]{a, b} }

func (p Pair[A, B]) Swap() Pair[B, A] { return Pair[B, A]{p.Second, p.First} }

func Keys[M ~map[K]V, K comparable, V any](m M) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func main() {
	fmt.Println(Sum(1, 2, 3), Sum(1.5, 2.25), Sum[int64]())
	fmt.Println(strings.Join(Map([]int{1, 2, 3}, func(i int) string { return fmt.Sprint(i * i) }), ","))
	var s Stack[error]
	s.Push(fmt.Errorf("one"))
	s.Push(nil)
	fmt.Println(s.Len())
	for {
		v, ok := s.Pop()
		if !ok {
			break
		}
		fmt.Println("popped", v)
	}
	var st Stack[fmt.Stringer]
	fmt.Println(st.Pop())
	fmt.Println(Largest([]Shape{Square(2), Circle{1.5}, Square(1)}))
	fmt.Println(Largest([]Square{3, 1}))
	c := Counter[string]()
	c("a")
	c("b")
	fmt.Println(c("a"))
	p := MakePair[Shape, int](Circle{2}, 7)
	fmt.Println(p, p.Swap())
	ks := Keys(map[string]bool{"x": true, "y": false})
	sort.Strings(ks)
	fmt.Println(ks)
}
