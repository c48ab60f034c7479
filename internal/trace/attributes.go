package trace

import (
	"slices"
	"strings"

	"github.com/go-usdt/usdt/internal/values"
)

// Names of the values an entry probe passes besides a rule's attributes
// (see rewrite's attributes): the W3C trace context the call joins, and
// what the attributes that panicked said, a "key: message" line each.
const (
	TraceParentKey = "usdt.traceparent"
	TraceStateKey  = "usdt.tracestate"
	PanicKey       = "usdt.panic"
)

// IsAttribute says v is an attribute a rule added, or one of the tracer's
// own, rather than an argument: its name has a namespace, which a Go
// identifier cannot have.
func (v Value) IsAttribute() bool { return strings.Contains(v.Name, ".") }

// showPanics makes each attribute whose expression panicked show the
// panic as its value, and drops the value that said so.
func showPanics(vs []Value) []Value {
	i := slices.IndexFunc(vs, func(v Value) bool { return v.Name == PanicKey })
	if i < 0 {
		return vs
	}
	said, _ := vs[i].Data.(string)
	vs = slices.Delete(vs, i, i+1)
	for line := range strings.SplitSeq(said, "\n") {
		key, msg, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		for j := range vs {
			if vs[j].Name == key {
				vs[j].Data = "<panic: " + values.JSONText(msg) + ">"
				vs[j].Text = "<panic: " + values.Escape(msg) + ">"
			}
		}
	}
	return vs
}
