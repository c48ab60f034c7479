// Command values calls functions with struct, pointer, interface, error
// and time arguments and results, and prints, for each call, what Go
// prints of them (%+v), so that a test can compare the tracer's values
// with Go's own.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"
)

type Addr struct {
	City string
	Zip  int32
}

type Order struct {
	ID     int64
	Name   string
	Ship   *Addr
	Paid   bool
	Weight float64
}

// Place takes an order by value and returns another and an error.
//
//go:noinline
func Place(o Order, when time.Time) (Order, error) {
	if o.Ship == nil {
		return Order{}, errors.New("no address")
	}
	o.ID++
	return o, nil
}

// Ship returns its error from a deferred exit probe's reads.
//
//go:noinline
func Ship(a *Addr, days [3]int16) (err error) {
	if a.Zip == 0 {
		return fmt.Errorf("ship to %s: %w", a.City, errors.New("no zip"))
	}
	return nil
}

// Describe takes an interface.
//
//go:noinline
func Describe(v fmt.Stringer) string { return v.String() }

func (a Addr) String() string { return a.City }

func report(fn string, vals ...any) {
	fmt.Fprintf(os.Stderr, "call main.%s", fn)
	for _, v := range vals {
		fmt.Fprintf(os.Stderr, " %+v", v)
	}
	fmt.Fprintln(os.Stderr)
}

func main() {
	when := time.Date(2026, 11, 25, 10, 30, 0, 123456789, time.UTC)
	lyon := &Addr{City: "Lyon", Zip: 69001}
	o := Order{ID: 41, Name: "Zoë's order", Ship: lyon, Paid: true, Weight: 2.5}
	r, err := Place(o, when)
	report("Place", o, when.Format(time.RFC3339Nano))
	report("Place=", r, err)
	r, err = Place(Order{ID: 7}, when)
	report("Place", Order{ID: 7}, when.Format(time.RFC3339Nano))
	report("Place=", r, err)
	err = Ship(&Addr{City: "Nowhere"}, [3]int16{1, 2, 3})
	report("Ship", &Addr{City: "Nowhere"}, [3]int16{1, 2, 3})
	report("Ship=", err)
	report("Describe", *lyon)
	report("Describe=", Describe(*lyon))
}
