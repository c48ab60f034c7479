package trace

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/values"
)

// Event is one fired probe, decoded from the record the tracer received,
// its values when first read: the text and -json printers, the latency
// histograms and the exporters (Options.Events) all read it.
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
	// AfterLoss is set on an automatic probe's event when events of its
	// goroutine were lost (the ring buffer full) just before it: the
	// calls the goroutine had open may have returned in that gap. The
	// in-process ring does not know whose events it dropped: after a
	// loss, it sets it on the next event of every goroutine.
	AfterLoss bool
	// Start is, of an exit whose probe the clock's trampoline fired (see
	// asmgen.SinceMark), when the call started by the program's own
	// clock, which Elapsed counts from: it returned at Start+Elapsed.
	// Zero for other exits, whose program read it out of reach.
	Start time.Time
	// Sampled says that the program sampled the call (Options.Sampling):
	// it wrote the event because the call's root was sampled, so a
	// consumer samples it no more.
	Sampled bool
	// Dropped names the arguments the probe had no room for.
	Dropped []string
	// values are the arguments of an entry or of a usdtgen probe, the
	// results of an exit, as the tracer prints them (Values); lazy,
	// where set, is what they are decoded from when first asked.
	values []Value
	lazy   *lazyValues
}

// Values are the arguments of an entry or of a usdtgen probe, the results
// of an exit, as the tracer prints them: decoded at the first call, which
// any goroutine may make.
func (e *Event) Values() []Value {
	if lv := e.lazy; lv != nil {
		return lv.values()
	}
	return e.values
}

// LastError reports whether the event's last value is an error (an
// exit's last result, where the probe table gives the types), and if so
// whether it is not nil: what -otlp's metrics count as a failed call,
// decoding that value alone while the others are not decoded yet.
func (e *Event) LastError() (isErr, failed bool) {
	if lv := e.lazy; lv != nil {
		return lv.lastError()
	}
	if vs := e.values; len(vs) > 0 && vs[len(vs)-1].Type == "error" {
		return true, vs[len(vs)-1].NonNilError()
	}
	return false, false
}

// WithValues sets the event's values, for an event made other than by
// decoding a record; it returns e.
func (e *Event) WithValues(vs []Value) *Event {
	e.values, e.lazy = vs, nil
	return e
}

// Value is one argument or result of an Event.
type Value struct {
	Name string
	Type string     // the Go type where the probe table records it
	Kind probe.Kind // Invalid when the binary does not say
	// Data is the value as -json writes it (string, bool, int64 or
	// uint64, or what the values decoder makes of a Go value), Text as
	// the event lines show it.
	Data any
	Text string
}

// NonNilError reports whether v is an error that is not nil. A nil error
// is null where the tracer reads the value, and a zero type word where it
// reads only the interface's words.
func (v Value) NonNilError() bool { return v.Type == "error" && v.Data != nil && v.Data != uint64(0) }

// Label is how the event's probe is shown.
func (e *Event) Label() string { return label(e.Function, e.Provider, e.Probe) }

// label is how a probe is shown: fn, the Go function of an automatic
// probe, else provider:name.
func label(fn, provider, name string) string {
	if fn != "" {
		return fn
	}
	return provider + ":" + name
}

// AppendText appends the event's line, without its newline, to b:
//
//	15:04:05.000000 g=GOROUTINE FUNCTION(ARGS)
//	15:04:05.000000 g=GOROUTINE FUNCTION = (RESULTS) ELAPSED
//	15:04:05.000000 pid=PID tid=TID PROVIDER:PROBE(ARGS)
func (e *Event) AppendText(b []byte) []byte {
	b = e.Time.AppendFormat(b, "15:04:05.000000")
	if e.Function != "" {
		b = fmt.Appendf(b, " g=%d %s", e.Goroutine, e.Label())
	} else {
		b = fmt.Appendf(b, " pid=%d tid=%d %s", e.PID, e.TID, e.Label())
	}
	if e.Exit {
		b = append(b, " = ("...)
	} else {
		b = append(b, '(')
	}
	for i, v := range e.Values() {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(append(append(b, v.Name...), '='), v.Text...)
	}
	if len(e.Dropped) > 0 {
		b = append(append(b, "; dropped: "...), strings.Join(e.Dropped, ", ")...)
	}
	b = append(b, ')')
	if e.Exit {
		b = fmt.Appendf(b, " %v", e.Elapsed)
	}
	return b
}

// MarshalJSON writes the event as -json prints it (AppendJSON).
func (e *Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil) }

// AppendJSON appends the event as -json prints it, an object whose
// arguments (or results) keep their declared order, to b: the bytes
// encoding/json would write for it, without its reflection and its
// second pass over what a MarshalJSON returns, which made the printer
// the reader's bottleneck at a million events a second.
func (e *Event) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"time":"`...)
	b = append(e.Time.AppendFormat(b, time.RFC3339Nano), `","pid":`...)
	b = append(strconv.AppendInt(b, int64(e.PID), 10), `,"tid":`...)
	b = append(strconv.AppendInt(b, int64(e.TID), 10), `,"provider":`...)
	b = append(values.AppendJSONString(b, e.Provider), `,"probe":`...)
	b = values.AppendJSONString(b, e.Probe)
	if e.Function != "" {
		b = append(values.AppendJSONString(append(b, `,"function":`...), e.Function), `,"goroutine":`...)
		b = strconv.AppendUint(b, e.Goroutine, 10)
	}
	if e.Exit {
		b = append(b, `,"results":{`...)
	} else {
		b = append(b, `,"args":{`...)
	}
	for i, v := range e.Values() {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = values.AppendJSONData(append(values.AppendJSONString(b, v.Name), ':'), v.Data); err != nil {
			return nil, fmt.Errorf("%s: %w", v.Name, err)
		}
	}
	b = append(b, '}')
	if e.Exit {
		b = strconv.AppendInt(append(b, `,"elapsed_ns":`...), int64(e.Elapsed), 10)
		if !e.Start.IsZero() {
			b = append(e.Start.AppendFormat(append(b, `,"start":"`...), time.RFC3339Nano), '"')
		}
	}
	if len(e.Dropped) > 0 {
		b = append(b, `,"dropped":[`...)
		for i, d := range e.Dropped {
			if i > 0 {
				b = append(b, ',')
			}
			b = values.AppendJSONString(b, d)
		}
		b = append(b, ']')
	}
	if e.AfterLoss {
		b = append(b, `,"after_loss":true`...)
	}
	return append(b, '}'), nil
}

// object is a JSON object that keeps its keys in order.
type object []field

type field struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}
