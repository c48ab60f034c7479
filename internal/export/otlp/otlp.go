// Package otlp sends the calls usdt-toolexec trace sees to an OpenTelemetry
// collector, one span per call, through the OpenTelemetry Go SDK and its
// OTLP/HTTP exporter.
//
// A span is made when its call's exit event arrives, with the call's
// times, so its children, which end first, need their parent's span
// context before the parent's span exists: each call gets its trace and
// span ids when it opens (see calltree), and an id generator hands the SDK
// those ids when the span is finally made.
//
// An event of a usdtgen probe becomes a span event of the innermost call
// open on its thread (see calltree.Tree.OnThread), or, when there is
// none, a span of its own, of no duration and without parent.
package otlp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/go-usdt/usdt/internal/calltree"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/trace"
)

// Exporter turns events into spans.
type Exporter struct {
	endpoint string
	tree     calltree.Tree
	provider *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
	sent     *countingExporter
	ended    int
	errs     errorHandler
}

// call is what the exporter keeps with an open call.
type call struct {
	ids    preset
	events []*trace.Event // of usdtgen probes while it was open
}

// New starts an exporter to the collector at endpoint, a base URL as
// OTEL_EXPORTER_OTLP_ENDPOINT takes it (the spans go to its /v1/traces).
// The other OTEL_* variables of the SDK and the exporter apply. service is
// the service.name of the spans, unless empty and OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES name one: then fallback is.
func New(ctx context.Context, endpoint, service, fallback string) (*Exporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-otlp %s: want the collector's base URL, such as http://127.0.0.1:4318", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	client, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("-otlp %s: %w", endpoint, err)
	}
	// The fallback first, so that the environment's name wins over it, and
	// -service over both.
	opts := []resource.Option{resource.WithAttributes(semconv.ServiceName(fallback)), resource.WithFromEnv(), resource.WithTelemetrySDK()}
	if service != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(service)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	e := &Exporter{endpoint: endpoint, sent: &countingExporter{SpanExporter: client}}
	otel.SetErrorHandler(&e.errs)
	e.provider = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(e.sent),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(presetIDs{}),
		// Every call is a span: a sampled-out root would leave its
		// children, sampled by their parent's flags, orphans.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	e.tracer = e.provider.Tracer("github.com/go-usdt/usdt/cmd/usdt-toolexec")
	e.tree.Begin = e.begin
	e.tree.End = e.end
	return e, nil
}

// Event takes one event of the tracer.
func (e *Exporter) Event(ev *trace.Event) {
	if ev.Function != "" {
		e.tree.Add(ev)
		return
	}
	if c := e.tree.OnThread(ev.PID, ev.TID); c != nil {
		d := c.Data.(*call)
		d.events = append(d.events, ev)
		return
	}
	attrs := append(values("", ev.Values), semconv.ProcessPID(ev.PID), semconv.ThreadID(ev.TID))
	_, span := e.tracer.Start(context.Background(), ev.Provider+":"+ev.Probe, oteltrace.WithTimestamp(ev.Time), oteltrace.WithAttributes(attrs...))
	span.End(oteltrace.WithTimestamp(ev.Time))
	e.ended++
}

// begin gives a call its ids: its parent's trace id and a new span id, or
// a new trace for a root.
func (e *Exporter) begin(c *calltree.Call) {
	d := &call{}
	if c.Parent != nil {
		d.ids.trace = c.Parent.Data.(*call).ids.trace
	} else {
		d.ids.trace = newTraceID()
	}
	d.ids.span = newSpanID()
	c.Data = d
}

func (e *Exporter) end(c *calltree.Call) {
	d := c.Data.(*call)
	ctx := context.WithValue(context.Background(), presetKey{}, d.ids)
	if c.Parent != nil {
		p := c.Parent.Data.(*call).ids
		ctx = oteltrace.ContextWithSpanContext(ctx, oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
			TraceID: p.trace, SpanID: p.span, TraceFlags: oteltrace.FlagsSampled,
		}))
	}
	ns, fn := splitFunction(c.Function)
	attrs := []attribute.KeyValue{
		semconv.CodeNamespace(ns), semconv.CodeFunction(fn),
		attribute.Int64("goroutine", int64(c.Goroutine)),
		semconv.ProcessPID(c.PID),
	}
	if c.Entry != nil {
		attrs = append(attrs, values("args.", c.Entry.Values)...)
	}
	attrs = append(attrs, values("results.", c.Exit.Values)...)
	_, span := e.tracer.Start(ctx, c.Function, oteltrace.WithTimestamp(c.Start), oteltrace.WithAttributes(attrs...))
	for _, ev := range d.events {
		span.AddEvent(ev.Provider+":"+ev.Probe, oteltrace.WithTimestamp(ev.Time), oteltrace.WithAttributes(values("", ev.Values)...))
	}
	for _, v := range c.Exit.Values {
		// A nil error is null where the tracer reads the value, and a
		// zero type word where it reads only the interface's words.
		if v.Type == "error" && v.Data != nil && v.Data != uint64(0) {
			msg, known := v.Data.(string)
			if !known {
				msg = v.Name + " is a non-nil error"
			}
			span.SetStatus(codes.Error, msg)
			break
		}
	}
	span.End(oteltrace.WithTimestamp(c.End))
	e.ended++
}

// Close flushes the spans and shuts the SDK down, within ctx, and reports
// the spans that did not reach the collector.
func (e *Exporter) Close(ctx context.Context) error {
	err := e.provider.Shutdown(ctx)
	var msgs []string
	if lost := e.ended - int(e.sent.exported.Load()) - int(e.sent.failed.Load()); lost > 0 {
		msgs = append(msgs, fmt.Sprintf("lost %d spans: the exporter's queue was full (OTEL_BSP_MAX_QUEUE_SIZE raises it)", lost))
	}
	if n := e.sent.failed.Load(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d spans not sent to %s: %v", n, e.endpoint, e.errs.first()))
	}
	if n := e.tree.Open(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls had not returned when tracing ended: no span", n))
	}
	if err != nil {
		msgs = append(msgs, fmt.Sprintf("OpenTelemetry shutdown: %v", err))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// splitFunction splits a function label at its last dot outside
// parentheses and brackets: "main.(*Store).Get" into "main.(*Store)" and
// "Get", "example.com/a.b/pkg.F" into "example.com/a.b/pkg" and "F".
func splitFunction(fn string) (namespace, name string) {
	depth := 0
	for i := len(fn) - 1; i >= 0; i-- {
		switch fn[i] {
		case ')', ']':
			depth++
		case '(', '[':
			depth--
		case '.':
			if depth == 0 {
				return fn[:i], fn[i+1:]
			}
		}
	}
	return "", fn
}

// values are attributes of vs, each named prefix plus its name.
func values(prefix string, vs []trace.Value) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, len(vs))
	for _, v := range vs {
		key := attribute.Key(prefix + v.Name)
		switch d := v.Data.(type) {
		case string:
			attrs = append(attrs, key.String(d))
		case bool:
			attrs = append(attrs, key.Bool(d))
		case int64:
			attrs = append(attrs, key.Int64(d))
		case uint64:
			if v.Kind == probe.Pointer || v.Kind == probe.Uintptr || d > math.MaxInt64 {
				attrs = append(attrs, key.String(v.Text))
			} else {
				attrs = append(attrs, key.Int64(int64(d)))
			}
		default:
			attrs = append(attrs, key.String(v.Text))
		}
	}
	return attrs
}

// preset are the ids a call was given when it opened.
type preset struct {
	trace oteltrace.TraceID
	span  oteltrace.SpanID
}

type presetKey struct{}

// presetIDs is the SDK's id generator: it returns the ids in the context,
// random ones when it has none.
type presetIDs struct{}

func (presetIDs) NewIDs(ctx context.Context) (oteltrace.TraceID, oteltrace.SpanID) {
	if p, ok := ctx.Value(presetKey{}).(preset); ok {
		return p.trace, p.span
	}
	return newTraceID(), newSpanID()
}

func (presetIDs) NewSpanID(ctx context.Context, _ oteltrace.TraceID) oteltrace.SpanID {
	if p, ok := ctx.Value(presetKey{}).(preset); ok {
		return p.span
	}
	return newSpanID()
}

func newTraceID() oteltrace.TraceID {
	var id oteltrace.TraceID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() oteltrace.SpanID {
	var id oteltrace.SpanID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// countingExporter counts the spans the batch processor hands the
// exporter, so that those it dropped are known.
type countingExporter struct {
	sdktrace.SpanExporter
	exported, failed atomic.Int64
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.failed.Add(int64(len(spans)))
	} else {
		c.exported.Add(int64(len(spans)))
	}
	return err
}

// errorHandler keeps the first error the SDK reports, which Close
// reports, rather than the SDK's default of logging each.
type errorHandler struct {
	mu  sync.Mutex
	err error
}

func (h *errorHandler) Handle(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

func (h *errorHandler) first() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
