// Package orders is a small in-memory order book: the instrumented
// library of the auto fixture.
package orders

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	_ "unsafe" // for go:linkname
)

// ErrUnknown is returned for an order id the store never issued.
var ErrUnknown = errors.New("unknown order")

var ready bool

func init() { ready = true }

// Status is where an order is in its life.
type Status uint8

// The statuses an order goes through.
const (
	Pending Status = iota
	Paid
	Shipped
)

func (s Status) String() string {
	return [...]string{"pending", "paid", "shipped"}[s]
}

// Cents is an amount of money.
type Cents int64

// Minus is a value-receiver method of a basic type.
func (c Cents) Minus(d Cents) Cents { return c - d }

// Order is one line of the book.
type Order struct {
	ID       int64
	Customer string
	Qty      int8
	Price    Cents
	Rush     bool
	Status   Status
}

func (o *Order) String() string { return fmt.Sprintf("#%d %s x%d", o.ID, o.Customer, o.Qty) }

// Total is a value-receiver method of a struct type.
func (o Order) Total(discount uint8) Cents {
	return o.Price*Cents(o.Qty) - Cents(discount)
}

type shipment struct {
	id   int64
	done chan error
}

// Store holds stock and orders.
type Store struct {
	mu      sync.Mutex
	next    int64
	stock   map[string]int
	orders  map[int64]*Order
	courier chan shipment
}

// NewStore opens a store with the given stock.
func NewStore(stock map[string]int) *Store {
	s := &Store{stock: stock, orders: map[int64]*Order{}, courier: make(chan shipment)}
	go s.deliver()
	return s
}

// deliver is the courier: one shipment at a time.
func (s *Store) deliver() {
	for sh := range s.courier {
		time.Sleep(50 * time.Microsecond)
		s.mu.Lock()
		o := s.orders[sh.id]
		if o != nil {
			o.Status = Shipped
		}
		s.mu.Unlock()
		if o == nil {
			sh.done <- ErrUnknown
			continue
		}
		sh.done <- nil
	}
}

// Place books an order.
func (s *Store) Place(customer string, qty int8, price int64, rush bool) (*Order, error) {
	if qty <= 0 {
		return nil, fmt.Errorf("order for %s: bad quantity %d", customer, qty)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	o := &Order{ID: s.next, Customer: customer, Qty: qty, Price: Cents(price), Rush: rush, Status: Paid}
	s.orders[o.ID] = o
	return o, nil
}

// Reserve takes n items out of stock and returns what is left; it panics
// when there are not enough.
func (s *Store) Reserve(item string, n int) (left int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stock[item] < n {
		panic(fmt.Sprintf("only %d %s left", s.stock[item], item))
	}
	s.stock[item] -= n
	return s.stock[item]
}

// Ship hands order id to the courier and waits for it: the calling
// goroutine sleeps, yields and blocks on channels on the way.
func (s *Store) Ship(id int64) error {
	start := monoNow()
	time.Sleep(time.Millisecond)
	runtime.Gosched()
	done := make(chan error, 1)
	s.courier <- shipment{id, done}
	err := <-done
	if monoNow() < start {
		panic("time went backwards")
	}
	return err
}

// Sum is a generic function.
func Sum[T ~int | ~int64](xs []T, start T) T {
	for _, x := range xs {
		start += x
	}
	return start
}

// Queue is a generic type.
type Queue[T any] struct{ items []T }

// Push has a pointer receiver of a generic type.
func (q *Queue[T]) Push(v T) int {
	q.items = append(q.items, v)
	return len(q.items)
}

// Len has a value receiver of a generic type.
func (q Queue[T]) Len() int { return len(q.items) }

// Tag is variadic.
func Tag(prefix string, codes ...uint8) int {
	n := 0
	for _, c := range codes {
		if c > 0 {
			n++
		}
	}
	return n
}

// Check has blank parameters and a blank result.
func Check(_ string, limit int, _ bool) (_ bool, err error) {
	if limit < 0 {
		return false, errors.New("negative limit")
	}
	return limit > 10, nil
}

// FindBin returns the first bin with room for need, scanning with labels
// and goto; -1, -1 when there is none.
func FindBin(bins [][]int, need int) (row, col int) {
	row, col = -1, -1
	r := 0
rows:
	if r >= len(bins) {
		goto done
	}
	for c, free := range bins[r] {
		if free >= need {
			row, col = r, c
			goto done
		}
	}
	r++
	goto rows
done:
	return
}

// SplitBill shares total among people; a division by zero is recovered
// into share -1 and an error.
func SplitBill(total, people int64) (share int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			share, err = -1, fmt.Errorf("split: %v", r)
		}
	}()
	return total / people, nil
}

// Tax has float parameters and result.
func Tax(amount float64, rate float32) float64 { return amount * float64(rate) }

// ForEach calls f for every x.
func ForEach(xs []int64, f func(int64)) {
	for _, x := range xs {
		f(x)
	}
}

// mix must never be instrumented: it is nosplit.
//
//go:nosplit
func mix(x uint32) uint32 { return x*2654435761 ^ x>>16 }

// Mix exposes mix.
func Mix(x uint32) uint32 { return mix(x) }

// monoNow has no body: it is the runtime's monotonic clock.
//
//go:linkname monoNow runtime.nanotime
func monoNow() int64

func _() {}

// Echo returns its interfaces unchanged: the entry and exit probes show
// the same type words.
func Echo(err error, v any) (error, any) { return err, v }
