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
//
// Every string a span carries is escaped as values.Escape escapes a
// value's text: protobuf sends only valid UTF-8, and refuses a whole
// request for one string that is not, every span of its batch with it.
package otlp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/go-usdt/usdt/internal/calltree"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/trace"
	"github.com/go-usdt/usdt/internal/values"
)

// Exporter turns events into spans.
type Exporter struct {
	// MinSpan, when not zero, drops the spans of calls shorter than it.
	// A call that contains a kept one lasts as long at least, so a kept
	// span's parent is kept too, and dropping never orphans a span; each
	// kept span counts the spans dropped below it in the attribute
	// usdt.dropped_children, and gets their usdtgen probes' events.
	MinSpan time.Duration

	endpoint string
	tree     calltree.Tree
	provider *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
	sent     *countingExporter
	ended    int
	// unsampled counts the calls not sent because the trace they joined
	// was not sampled by its caller.
	unsampled int
	errs      errorHandler
}

// call is what the exporter keeps with an open call.
type call struct {
	ids    preset
	events []*trace.Event // of usdtgen probes while it was open
	// dropped counts the spans dropped below it (see MinSpan), and kept
	// says a span of a call inside it was sent, which keeps its own.
	dropped int64
	kept    bool
	// remote is the span of another process a root call joins (see
	// join); unsampled, that the trace it is in records nothing.
	remote    oteltrace.SpanContext
	unsampled bool
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
	// The binary's name and OTEL_RESOURCE_ATTRIBUTES's values, which it
	// URL-decodes, can be any bytes: the resource goes with every span.
	kvs := res.Attributes()
	for i, kv := range kvs {
		if kv.Value.Type() == attribute.STRING {
			kvs[i] = attribute.String(values.Escape(string(kv.Key)), values.Escape(kv.Value.AsString()))
		}
	}
	res = resource.NewWithAttributes(res.SchemaURL(), kvs...)
	e := &Exporter{endpoint: endpoint, sent: &countingExporter{SpanExporter: client}}
	otel.SetErrorHandler(&e.errs)
	e.provider = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(e.sent, batchOptions()...),
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

// batchOptions size the SDK's span queue and its exports for a tracer,
// which ends spans far faster than a service does: at the SDK's defaults
// (2,048 and 512) bbolt's tests, every function traced, lost 22,599 spans
// to a full queue, and a span lost that way leaves its children without
// their parent in the collector. The environment's settings still win.
func batchOptions() []sdktrace.BatchSpanProcessorOption {
	var opts []sdktrace.BatchSpanProcessorOption
	if os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE") == "" {
		opts = append(opts, sdktrace.WithMaxQueueSize(1<<16))
	}
	if os.Getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") == "" {
		opts = append(opts, sdktrace.WithMaxExportBatchSize(4096))
	}
	return opts
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
	attrs := append(valueAttributes("", ev.Values), semconv.ProcessPID(ev.PID), semconv.ThreadID(ev.TID))
	_, span := e.tracer.Start(context.Background(), probeName(ev), oteltrace.WithTimestamp(ev.Time), oteltrace.WithAttributes(attrs...))
	span.End(oteltrace.WithTimestamp(ev.Time))
	e.ended++
}

// begin gives a call its ids: its parent's trace id and a new span id, or
// a new trace for a root.
func (e *Exporter) begin(c *calltree.Call) {
	d := &call{}
	if c.Parent != nil {
		parent := c.Parent.Data.(*call)
		d.ids.trace, d.unsampled = parent.ids.trace, parent.unsampled
	} else if a := c.Adopted; a != nil {
		// The call began before a root that is now its child: the trace
		// is the one that root and the calls it made are in.
		adopted := a.Data.(*call)
		d.ids.trace, d.unsampled, d.remote = adopted.ids.trace, adopted.unsampled, adopted.remote
	} else if d.remote = join(c.Entry); d.remote.IsValid() {
		d.ids.trace, d.unsampled = d.remote.TraceID(), !d.remote.IsSampled()
	} else {
		d.ids.trace = newTraceID()
	}
	d.ids.span = newSpanID()
	c.Data = d
}

// join is the span context of the W3C traceparent (and tracestate) a root
// call's entry passes (a rule's context, or a request's headers): the
// call's span joins that trace, under that span. It is invalid when the
// entry has none, or none that the W3C format allows.
func join(entry *trace.Event) oteltrace.SpanContext {
	if entry == nil {
		return oteltrace.SpanContext{}
	}
	carrier := propagation.MapCarrier{}
	for _, v := range entry.Values {
		s, ok := v.Data.(string)
		switch {
		case !ok:
		case v.Name == trace.TraceParentKey:
			carrier["traceparent"] = s
		case v.Name == trace.TraceStateKey:
			carrier["tracestate"] = s
		}
	}
	return oteltrace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

func (e *Exporter) end(c *calltree.Call) {
	d := c.Data.(*call)
	if d.unsampled {
		e.unsampled++
		return
	}
	var parent *call
	if c.Parent != nil {
		parent = c.Parent.Data.(*call)
	}
	if c.Elapsed() < e.MinSpan && !d.kept {
		if parent != nil {
			parent.dropped += 1 + d.dropped
			parent.events = append(parent.events, d.events...)
		}
		return
	}
	if parent != nil {
		parent.kept = true
	}
	ctx := context.WithValue(context.Background(), presetKey{}, d.ids)
	if d.remote.IsValid() {
		ctx = oteltrace.ContextWithRemoteSpanContext(ctx, d.remote)
	}
	if c.Parent != nil {
		p := c.Parent.Data.(*call).ids
		ctx = oteltrace.ContextWithSpanContext(ctx, oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
			TraceID: p.trace, SpanID: p.span, TraceFlags: oteltrace.FlagsSampled,
		}))
	}
	name := values.Escape(c.Function)
	ns, fn := splitFunction(name)
	attrs := []attribute.KeyValue{
		semconv.CodeNamespace(ns), semconv.CodeFunction(fn),
		attribute.Int64("goroutine", int64(c.Goroutine)),
		semconv.ProcessPID(c.PID),
	}
	if c.Entry != nil {
		attrs = append(attrs, valueAttributes("args.", c.Entry.Values)...)
	}
	var results []trace.Value
	if c.Exit != nil {
		results = c.Exit.Values
	} else {
		attrs = append(attrs, attribute.Bool("usdt.lost_exit", true))
	}
	if c.Uncertain {
		attrs = append(attrs, attribute.Bool("usdt.parent_uncertain", true))
	}
	attrs = append(attrs, valueAttributes("results.", results)...)
	if d.dropped > 0 {
		attrs = append(attrs, attribute.Int64("usdt.dropped_children", d.dropped))
	}
	_, span := e.tracer.Start(ctx, name, oteltrace.WithTimestamp(c.Start), oteltrace.WithAttributes(attrs...))
	for _, ev := range d.events {
		span.AddEvent(probeName(ev), oteltrace.WithTimestamp(ev.Time), oteltrace.WithAttributes(valueAttributes("", ev.Values)...))
	}
	for _, v := range results {
		// A nil error is null where the tracer reads the value, and a
		// zero type word where it reads only the interface's words.
		if v.Type == "error" && v.Data != nil && v.Data != uint64(0) {
			msg, known := v.Data.(string)
			if !known {
				msg = v.Name + " is a non-nil error"
			}
			span.SetStatus(codes.Error, values.Escape(msg))
			break
		}
	}
	span.End(oteltrace.WithTimestamp(c.End))
	e.ended++
}

// Close flushes the spans and shuts the SDK down, within ctx, and reports
// the spans that did not reach the collector.
func (e *Exporter) Close(ctx context.Context) error {
	open := e.tree.Close()
	err := e.provider.Shutdown(ctx)
	var msgs []string
	if lost := e.ended - int(e.sent.exported.Load()) - int(e.sent.failed.Load()) - int(e.sent.refused.Load()); lost > 0 {
		msgs = append(msgs, fmt.Sprintf("lost %d spans: the exporter's queue was full (OTEL_BSP_MAX_QUEUE_SIZE raises it)", lost))
	}
	if n := e.sent.failed.Load(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d spans not sent to %s: %v", n, e.endpoint, e.errs.first()))
	}
	if n := e.sent.refused.Load(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d spans not sent: protobuf refuses strings that are not valid UTF-8, such as %v", n, e.sent.why.first()))
	}
	if e.unsampled > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls joined traces their callers did not sample (the traceparent's flags): no span", e.unsampled))
	}
	if open > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls had not returned when tracing ended, or their exit events were lost: their spans (usdt.lost_exit) end with the last call they made", open))
	}
	if n, gs := e.tree.Lost(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls on %d goroutines lost their exit event: their spans (usdt.lost_exit) end with the last call they made", n, gs))
	}
	if n, gs := e.tree.Uncertain(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls on %d goroutines began after events of theirs were lost: their spans' parents (usdt.parent_uncertain) may be calls that had returned", n, gs))
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

// probeName names the span or the span event of a usdtgen probe's event.
func probeName(ev *trace.Event) string {
	return values.Escape(ev.Provider + ":" + ev.Probe)
}

// valueAttributes are attributes of vs, each named prefix plus its name.
func valueAttributes(prefix string, vs []trace.Value) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, len(vs))
	for _, v := range vs {
		name := prefix + v.Name
		switch {
		case v.Name == trace.TraceParentKey || v.Name == trace.TraceStateKey:
			// The span's context, not an attribute.
			continue
		case v.IsAttribute():
			// A rule's attribute, named as the rule names it.
			name = v.Name
		}
		key := attribute.Key(values.Escape(name))
		switch d := v.Data.(type) {
		case string:
			attrs = append(attrs, key.String(values.Escape(d)))
		case bool:
			attrs = append(attrs, key.Bool(d))
		case int64:
			attrs = append(attrs, key.Int64(d))
		case uint64:
			if v.Kind == probe.Pointer || v.Kind == probe.Uintptr || d > math.MaxInt64 {
				attrs = append(attrs, key.String(values.Escape(v.Text)))
			} else {
				attrs = append(attrs, key.Int64(int64(d)))
			}
		default:
			attrs = append(attrs, key.String(values.Escape(v.Text)))
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
// exporter, so that those it dropped are known. It keeps back the spans
// that hold a string protobuf would refuse, which would take the rest of
// their batch down with them.
type countingExporter struct {
	sdktrace.SpanExporter
	exported, failed, refused atomic.Int64
	// why is what was wrong with the first span refused.
	why errorHandler
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	send := make([]sdktrace.ReadOnlySpan, 0, len(spans))
	for _, s := range spans {
		if bad := invalidString(s); bad != "" {
			c.refused.Add(1)
			c.why.Handle(fmt.Errorf("%s of span %q", bad, s.Name()))
			continue
		}
		send = append(send, s)
	}
	if len(send) == 0 {
		return nil
	}
	err := c.SpanExporter.ExportSpans(ctx, send)
	if err != nil {
		c.failed.Add(int64(len(send)))
	} else {
		c.exported.Add(int64(len(send)))
	}
	return err
}

// invalidString says which of the strings the exporter gives a span is
// not valid UTF-8, or returns "" when all are.
func invalidString(s sdktrace.ReadOnlySpan) string {
	if !utf8.ValidString(s.Name()) {
		return "the name"
	}
	if k := invalidAttribute(s.Attributes()); k != "" {
		return "attribute " + k
	}
	for _, ev := range s.Events() {
		if !utf8.ValidString(ev.Name) {
			return fmt.Sprintf("the name of event %q", ev.Name)
		}
		if k := invalidAttribute(ev.Attributes); k != "" {
			return fmt.Sprintf("attribute %s of event %q", k, ev.Name)
		}
	}
	if !utf8.ValidString(s.Status().Description) {
		return "the status message"
	}
	return ""
}

// invalidAttribute names the first attribute whose key or string value is
// not valid UTF-8, "" for none.
func invalidAttribute(kvs []attribute.KeyValue) string {
	for _, kv := range kvs {
		if !utf8.ValidString(string(kv.Key)) || kv.Value.Type() == attribute.STRING && !utf8.ValidString(kv.Value.AsString()) {
			return fmt.Sprintf("%q", kv.Key)
		}
	}
	return ""
}

// errorHandler keeps the first error it is handed, which Close reports:
// of the SDK's, rather than the SDK's default of logging each, and of the
// spans refused.
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
