package trace

import (
	"time"

	"github.com/go-usdt/usdt/internal/probe"
)

// Event is one decoded event, as Options.Events receives it.
type Event struct {
	Time     time.Time // wall clock
	PID, TID int
	Provider string
	Probe    string
	// Function is the Go function of an automatic probe, as the tracer
	// labels it ("main.(*Store).Get"), and Package its import path; both
	// are empty for usdtgen probes.
	Function, Package string
	Exit              bool
	// Paired is set on an entry whose function's exit probe is traced
	// too, so that a consumer pairing calls knows to wait for the exit.
	Paired    bool
	Goroutine uint64
	Elapsed   time.Duration // of an exit: since the function's entry
	// Values are the arguments of an entry or of a usdtgen probe, the
	// results of an exit, as the tracer prints them.
	Values []Value
}

// Value is one argument or result of an Event.
type Value struct {
	Name string
	Type string     // the Go type where the probe table records it
	Kind probe.Kind // Invalid when the binary does not say
	// Data is the value as -json writes it (string, bool, int64 or
	// uint64), Text as the event lines show it.
	Data any
	Text string
}

// emit hands one event to opt.Events.
func (p *printer) emit(t time.Time, tgid, tid int, s *site, gid uint64, elapsed time.Duration, vals []value) {
	if p.paired == nil {
		p.paired = map[string]bool{}
		for _, x := range p.sites {
			if x.exit {
				p.paired[x.fn] = true
			}
		}
	}
	ev := &Event{
		Time: t, PID: tgid, TID: tid, Provider: s.Provider, Probe: s.Name,
		Function: s.fn, Exit: s.exit, Paired: s.fn != "" && !s.exit && p.paired[s.fn],
		Goroutine: gid, Elapsed: elapsed,
		Values: make([]Value, len(vals)),
	}
	if s.fn != "" {
		ev.Package = s.table.Package
	}
	var decl []probe.Arg
	if len(s.table.Args) == len(s.args) {
		decl = s.table.Args[s.firstShown():]
	}
	for i, v := range vals {
		ev.Values[i] = Value{Name: s.names[i], Kind: v.kind, Data: v.json(), Text: v.String()}
		if i < len(decl) {
			ev.Values[i].Type = decl[i].Type
		}
	}
	p.opt.Events(ev)
}
