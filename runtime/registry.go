package runtime

import (
	"cmp"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Probe describes one probe compiled into this binary.
type Probe struct {
	// Provider and Name are the probe's names as the ELF note spells them,
	// and as tracers address it (usdt:binary:provider:name).
	Provider, Name string
	// Args is the Go-level signature, e.g. "(id int64, name string)", to
	// tell a human which argN is which.
	Args string
	// Semaphore is the probe's semaphore, which the kernel increments
	// while a tracer is attached. A nil Semaphore reports the probe as
	// disabled.
	Semaphore *uint16
}

// registry is guarded by a mutex rather than built lock-free: Register runs
// once per package at init time and Probes is for humans, so neither is hot.
var registry struct {
	mu     sync.Mutex
	probes []Probe
}

// Register records probes so that [Probes] and [WriteText] can report them.
// Generated init functions call it once per package; it copies the slice,
// keeps the order given, and is safe to call concurrently with everything in
// this package.
func Register(probes []Probe) {
	if len(probes) == 0 {
		return
	}
	registry.mu.Lock()
	registry.probes = append(registry.probes, probes...)
	registry.mu.Unlock()
}

// ProbeState is a snapshot of one registered probe.
type ProbeState struct {
	Provider, Name, Args string
	// Enabled reports whether a tracer was attached when the snapshot was
	// taken, that is whether the probe's semaphore was non-zero.
	Enabled bool
}

// Probes returns a snapshot of every registered probe, sorted by provider
// then name. Probes registered more than once, or under the same names by
// different packages, are all listed, in registration order.
//
// Enabled is read with a plain 16-bit load. That is enough: the kernel, not
// Go code, writes the semaphore, so the Go memory model and sync/atomic
// (which has no 16-bit operations anyway) have nothing to offer; an aligned
// 2-byte load cannot tear on any architecture Go supports, so it yields
// either the old or the new count; and a tracer may attach or detach right
// after the load regardless, so the result is a snapshot however it is read.
// Generated probe code tests the semaphore the same way.
func Probes() []ProbeState {
	registry.mu.Lock()
	states := make([]ProbeState, len(registry.probes))
	for i, p := range registry.probes {
		states[i] = ProbeState{
			Provider: p.Provider,
			Name:     p.Name,
			Args:     p.Args,
			Enabled:  p.Semaphore != nil && *p.Semaphore != 0,
		}
	}
	registry.mu.Unlock()
	slices.SortStableFunc(states, func(a, b ProbeState) int {
		return cmp.Or(strings.Compare(a.Provider, b.Provider), strings.Compare(a.Name, b.Name))
	})
	return states
}

// WriteText writes the probes listed by [Probes] to w as an aligned,
// human-readable table with a header line. It is meant to back a debug HTTP
// handler, which callers write themselves: importing net/http here would
// bloat every instrumented binary.
func WriteText(w io.Writer) error {
	states := Probes()
	rows := make([][4]string, 0, len(states)+1)
	rows = append(rows, [4]string{"PROVIDER", "NAME", "ARGS", "ENABLED"})
	for _, s := range states {
		enabled := "no"
		if s.Enabled {
			enabled = "yes"
		}
		rows = append(rows, [4]string{oneLine(s.Provider), oneLine(s.Name), oneLine(s.Args), enabled})
	}

	// text/tabwriter would do the alignment, but it pulls fmt, os and
	// reflect into every instrumented binary.
	var width [3]int
	for _, r := range rows {
		for i := range width {
			width[i] = max(width[i], utf8.RuneCountInString(r[i]))
		}
	}
	var b []byte
	for _, r := range rows {
		for i := range width {
			b = append(b, r[i]...)
			for range width[i] - utf8.RuneCountInString(r[i]) + 2 {
				b = append(b, ' ')
			}
		}
		b = append(b, r[3]...)
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}

// oneLine keeps a field from breaking the table's rows and columns.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\t\n\r") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return ' '
		}
		return r
	}, s)
}
