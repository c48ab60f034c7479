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
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/go-usdt/usdt/internal/calltree"
	"github.com/go-usdt/usdt/internal/export/symtab"
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

	// Sampler, when set, decides whether a root call (one that joins no
	// caller's trace) starts a trace that is sent: the OpenTelemetry
	// SDK's TraceIDRatioBased for -sample, on the trace id trace gives
	// it. The calls of a trace follow its root's decision, and a root
	// that joins a caller's trace follows that caller's sampled flag, as
	// ParentBased has them.
	Sampler sdktrace.Sampler

	// Functions, when set, is the traced binary's table of functions,
	// where a span finds its function's file and line.
	Functions *symtab.Table

	// Sent, when set, is handed each call whose exit event made a span
	// that goes to the collector (sampled, and not below MinSpan): its
	// function, how long it took, and the span. The metrics take them
	// as their histograms' exemplars. It is called on Event's goroutine.
	Sent func(function string, elapsed time.Duration, span oteltrace.SpanContext, end time.Time)

	endpoint string
	tree     calltree.Tree
	// batch is the SDK's batch span processor that every process's
	// tracer provider hands its spans to, and so the one exporter.
	batch sdktrace.SpanProcessor
	// queue reads the batch processor's own count of the spans its full
	// queue dropped (watchedBatch).
	queue *sdkmetric.ManualReader
	// base is the resource every process's starts from, fallback the
	// executable's name (see process.go).
	base     *resource.Resource
	fallback string
	// procs are the processes whose events arrived, by pid, with their
	// tracer providers; proc is where their identities are read, /proc.
	procs map[int]*process
	proc  string
	// started are the identities of the processes trace started or
	// attached to (see Started) whose first event has not arrived.
	mu      sync.Mutex
	started map[int]identity
	// sweepAt is the number of processes at which the next event of a
	// new one looks for those that ended (see sweep).
	sweepAt int
	// sources are the code attributes of the functions met, by label.
	sources map[string][]attribute.KeyValue
	sent    *countingExporter
	ended   int
	// unsampled counts the calls not sent because the trace they joined
	// was not sampled by its caller; sampledOut, those of the traces
	// that Sampler did not sample.
	unsampled, sampledOut int
	errs                  errorHandler
}

// Ratio is the Sampler of a share r of the root calls' traces: the
// SDK's TraceIDRatioBased, which keeps a trace whose id's low 63 bits
// are below r's share of them, as every SDK that samples it does.
func Ratio(r float64) sdktrace.Sampler { return sdktrace.TraceIDRatioBased(r) }

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
	// sampledOut says that the trace's root was not sampled (Sampler).
	sampledOut bool
}

// New starts an exporter to the collector at endpoint, a base URL as
// OTEL_EXPORTER_OTLP_ENDPOINT takes it (the spans go to its /v1/traces).
// The other OTEL_* variables of the SDK and the exporter apply. Each
// process's spans have a resource of their own, with its service.name
// (see process.go): the process's OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES, else service, else trace's own environment's,
// else fallback, the executable's name. With block (trace's -block),
// a span that finds the SDK's queue full waits for room rather than
// being dropped: the wait goes back to the program's probes, which
// wait for the ring (bounded there).
func New(ctx context.Context, endpoint, service, fallback string, block bool) (*Exporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-otlp %s: want the collector's base URL, such as http://127.0.0.1:4318", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	client, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("-otlp %s: %w", endpoint, err)
	}
	base, err := baseResource(ctx, service, fallback)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	e := &Exporter{
		endpoint: endpoint, sent: &countingExporter{SpanExporter: client},
		base: base, fallback: fallback, procs: map[int]*process{}, proc: procfs, sweepAt: sweepFrom,
		sources: map[string][]attribute.KeyValue{}, started: map[int]identity{},
	}
	otel.SetErrorHandler(&e.errs)
	opts := batchOptions()
	if block {
		opts = append(opts, sdktrace.WithBlocking())
	}
	e.batch, e.queue = watchedBatch(e.sent, opts...)
	e.tree.Begin = e.begin
	e.tree.End = e.end
	return e, nil
}

// process is a traced process: its identity, and the tracer of its
// spans, whose provider gives them its resource.
type process struct {
	id       identity
	provider *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
	// open counts its calls open; gone says a sweep found it ended.
	open int
	gone bool
}

// procfs is where processes are read: /proc, but in tests.
var procfs = "/proc"

// Started reads what the process pid's resource is made of, while it
// runs: trace.Options.Started. The process's first event, which may come
// after it exited (the BPF transport's events are read after the fact),
// finds it there. env, when not nil, is the environment trace gave the
// process: a short command may have left /proc by the time it is read.
// It may be called on any goroutine.
func (e *Exporter) Started(pid int, env []string) {
	id := inspect(e.proc, pid)
	if env != nil {
		id.service, id.attrs = otelEnviron([]byte(strings.Join(env, "\x00")))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.started) >= maxStarted {
		// Processes trace met whose events never came: those gone go.
		for pid, id := range e.started {
			if !id.same(e.proc) {
				delete(e.started, pid)
			}
		}
	}
	e.started[pid] = id
}

// maxStarted is the number of processes met and not yet seen in an
// event from which Started forgets those that ended.
const maxStarted = 256

// sweepFrom is the number of processes from which a new one's first event
// looks for processes that ended.
const sweepFrom = 64

// process is the process pid, whose identity is read the first time an
// event of its arrives, while it runs.
func (e *Exporter) process(pid int) *process {
	if p := e.procs[pid]; p != nil {
		return p
	}
	if len(e.procs) >= e.sweepAt {
		e.sweep()
	}
	e.mu.Lock()
	id, ok := e.started[pid]
	delete(e.started, pid)
	e.mu.Unlock()
	// A process met that has ended is what was read of it then; a pid
	// that another process has now is that one's.
	if !ok || !id.same(e.proc) && startTime(filepath.Join(e.proc, strconv.Itoa(pid))) != "" {
		id = inspect(e.proc, pid)
	}
	p := &process{id: id}
	p.provider = sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(shared{e.batch}),
		sdktrace.WithResource(processResource(e.base, p.id, e.fallback)),
		sdktrace.WithIDGenerator(presetIDs{}),
		// Every call is a span: a sampled-out root would leave its
		// children, sampled by their parent's flags, orphans.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	p.tracer = p.provider.Tracer("github.com/go-usdt/usdt/cmd/usdt-toolexec")
	e.procs[pid] = p
	return p
}

// sweep drops the processes that ended, with no call open, and that a
// sweep before found ended: their spans are all made, handed to the
// batch processor with their resource, and an event still on its way
// from the tracer's buffers had time to arrive. The processes kept are
// those that run, and those that ended since the last sweep, or with
// calls open that only Close ends: the next sweep comes when they have
// doubled.
func (e *Exporter) sweep() {
	for pid, p := range e.procs {
		switch {
		case p.open > 0 || p.id.same(e.proc):
		case p.gone:
			// Its provider holds nothing the batch processor has not:
			// its spans were ended, and shared keeps its shutdown from
			// the processor.
			p.provider.Shutdown(context.Background())
			delete(e.procs, pid)
		default:
			p.gone = true
		}
	}
	e.sweepAt = max(sweepFrom, 2*len(e.procs))
}

// shared is the batch processor as each process's tracer provider holds
// it: shutting a provider down leaves it to the others, and Close shuts
// it down once.
type shared struct{ sdktrace.SpanProcessor }

func (shared) Shutdown(context.Context) error { return nil }

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
	p := e.process(ev.PID)
	if ev.Function != "" {
		e.tree.Add(ev)
		return
	}
	if c := e.tree.OnThread(ev.PID, ev.TID); c != nil {
		d := c.Data.(*call)
		d.events = append(d.events, ev)
		return
	}
	attrs := append(valueAttributes("", ev.Values()), semconv.ThreadID(ev.TID))
	_, span := p.tracer.Start(context.Background(), probeName(ev), oteltrace.WithTimestamp(ev.Time), oteltrace.WithAttributes(attrs...))
	span.End(oteltrace.WithTimestamp(ev.Time))
	e.ended++
}

// begin gives a call its ids: its parent's trace id and a new span id, or
// a new trace for a root.
func (e *Exporter) begin(c *calltree.Call) {
	d := &call{}
	if c.Parent != nil {
		parent := c.Parent.Data.(*call)
		d.ids.trace, d.unsampled, d.sampledOut = parent.ids.trace, parent.unsampled, parent.sampledOut
	} else if a := c.Adopted; a != nil {
		// The call began before a root that is now its child: the trace
		// is the one that root and the calls it made are in.
		adopted := a.Data.(*call)
		d.ids.trace, d.unsampled, d.sampledOut, d.remote = adopted.ids.trace, adopted.unsampled, adopted.sampledOut, adopted.remote
	} else if d.remote = join(c.Entry); d.remote.IsValid() {
		d.ids.trace, d.unsampled = d.remote.TraceID(), !d.remote.IsSampled()
	} else {
		d.ids.trace = newTraceID()
		switch {
		case e.Sampler != nil && sampledInProgram(c):
			// The program sampled the root already: a trace id that
			// the sampler would have sampled too, for the services
			// downstream that sample by the trace id.
			for range maxIDTries {
				if e.sampled(d.ids.trace, c.Function) {
					break
				}
				d.ids.trace = newTraceID()
			}
		case e.Sampler != nil:
			d.unsampled = !e.sampled(d.ids.trace, c.Function)
			d.sampledOut = d.unsampled
		}
	}
	d.ids.span = newSpanID()
	c.Data = d
	e.process(c.PID).open++
}

// SampledOut counts calls that the program's sampling left out
// (trace.Options.Sampling), of which no event came: those in traces that
// -sample did not sample, and those in traces their callers did not
// sample. Called on the events' goroutine, or after the last event.
func (e *Exporter) SampledOut(bySample, byCaller int) {
	e.sampledOut += bySample
	e.unsampled += byCaller
}

// maxIDTries bounds the trace ids begin draws for a root that the
// program sampled, for one that Sampler samples too: 1/rate draws on
// average, so a rate below 1/1000 may end with one it does not.
const maxIDTries = 10000

// sampled reports whether Sampler samples the trace id of a root call of
// fn.
func (e *Exporter) sampled(id oteltrace.TraceID, fn string) bool {
	r := e.Sampler.ShouldSample(sdktrace.SamplingParameters{TraceID: id, Name: fn})
	return r.Decision == sdktrace.RecordAndSample
}

// sampledInProgram reports whether the program sampled call c (its
// events are trace.Event's Sampled).
func sampledInProgram(c *calltree.Call) bool {
	return c.Entry != nil && c.Entry.Sampled || c.Exit != nil && c.Exit.Sampled
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
	for _, v := range entry.Values() {
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
	p := e.process(c.PID)
	p.open--
	if d.sampledOut {
		e.sampledOut++
		return
	}
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
	attrs := append(e.code(c), attribute.Int64("goroutine", int64(c.Goroutine)))
	if c.Entry != nil {
		attrs = append(attrs, valueAttributes("args.", c.Entry.Values())...)
	}
	var results []trace.Value
	switch {
	case c.Exit != nil:
		results = c.Exit.Values()
	case c.Unwound:
		attrs = append(attrs, attribute.Bool("usdt.unwound", true))
	default:
		attrs = append(attrs, attribute.Bool("usdt.lost_exit", true))
	}
	if c.Uncertain {
		attrs = append(attrs, attribute.Bool("usdt.parent_uncertain", true))
	}
	attrs = append(attrs, valueAttributes("results.", results)...)
	if d.dropped > 0 {
		attrs = append(attrs, attribute.Int64("usdt.dropped_children", d.dropped))
	}
	_, span := p.tracer.Start(ctx, name, oteltrace.WithTimestamp(c.Start), oteltrace.WithAttributes(attrs...))
	for _, ev := range d.events {
		span.AddEvent(probeName(ev), oteltrace.WithTimestamp(ev.Time), oteltrace.WithAttributes(valueAttributes("", ev.Values())...))
	}
	if c.Unwound {
		span.SetStatus(codes.Error, "a panic unwound the call")
	}
	for _, v := range results {
		if v.NonNilError() {
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
	if e.Sent != nil && c.Exit != nil {
		e.Sent(c.Function, c.Elapsed(), span.SpanContext(), c.End)
	}
}

// Close flushes the spans and shuts the SDK down, within ctx, and reports
// the spans that did not reach the collector.
func (e *Exporter) Close(ctx context.Context) error {
	open := e.tree.Close()
	for _, p := range e.procs {
		p.provider.Shutdown(ctx)
	}
	err := e.batch.Shutdown(ctx)
	var msgs []string
	if lost := e.ended - int(e.sent.exported.Load()) - int(e.sent.failed.Load()) - int(e.sent.refused.Load()); lost > 0 {
		msgs = append(msgs, fmt.Sprintf("lost %d spans: the exporter's queue was full (OTEL_BSP_MAX_QUEUE_SIZE raises it)", lost))
	}
	if n := e.sent.failed.Load(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d spans not sent to %s: %v", n, e.endpoint, e.errs.first()))
	}
	if n := e.sent.retries.Load(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("the collector at %s could not be reached for a while: %d exports were tried again", e.endpoint, n))
	}
	if n := e.sent.refused.Load(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d spans not sent: protobuf refuses strings that are not valid UTF-8, such as %v", n, e.sent.why.first()))
	}
	if e.unsampled > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls joined traces their callers did not sample (the traceparent's flags): no span", e.unsampled))
	}
	if e.sampledOut > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls were in traces that -sample did not sample: no span", e.sampledOut))
	}
	if open > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls had not returned when tracing ended, or their exit events were lost: their spans (usdt.lost_exit) end with the last call they made", open))
	}
	if n, gs := e.tree.Lost(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls on %d goroutines lost their exit event: their spans (usdt.lost_exit) end with the last call they made", n, gs))
	}
	if n, gs := e.tree.Unwound(); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d calls on %d goroutines did not return, with none of their events lost: a panic unwound them (and a caller recovered it); their spans (usdt.unwound, status error) end with the last call they made", n, gs))
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

// code are the code attributes of c's function: code.function.name, its
// Go symbol name, qualified by its package's import path, and, where the
// binary's table of functions has it, code.file.path and
// code.line.number of its entry.
func (e *Exporter) code(c *calltree.Call) []attribute.KeyValue {
	key := c.Package + "\x00" + c.Function
	attrs, ok := e.sources[key]
	if !ok {
		attrs = []attribute.KeyValue{semconv.CodeFunctionName(values.Escape(symtab.Qualified(c.Function, c.Package)))}
		if e.Functions != nil {
			if fn, _ := e.Functions.Lookup(c.Function, c.Package); fn != nil {
				if file, line := e.Functions.Source(fn); file != "" {
					attrs = append(attrs, semconv.CodeFilePath(values.Escape(file)), semconv.CodeLineNumber(line))
				}
			}
		}
		e.sources[key] = attrs
	}
	return slices.Clip(attrs)
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

// Dropped counts, by reason, the spans that have not reached the
// collector so far: "export_failed", those the collector did not take
// (after the exporter's retries), "refused", those that held a string
// protobuf refuses, and "queue_full", those the exporter's queue had no
// room for. It may be called on any goroutine.
func (e *Exporter) Dropped() map[string]uint64 {
	return map[string]uint64{
		"export_failed": uint64(e.sent.failed.Load()),
		"refused":       uint64(e.sent.refused.Load()),
		"queue_full":    queueFull(e.queue),
	}
}

// countingExporter counts the spans the batch processor hands the
// exporter, so that those it dropped are known. It keeps back the spans
// that hold a string protobuf would refuse, which would take the rest of
// their batch down with them.
type countingExporter struct {
	sdktrace.SpanExporter
	exported, failed, refused atomic.Int64
	// retries counts the attempts made again to reach the collector.
	retries atomic.Int64
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
	err := c.export(ctx, send)
	if err != nil {
		c.failed.Add(int64(len(send)))
	} else {
		c.exported.Add(int64(len(send)))
	}
	return err
}

// export sends spans, again and again while the collector cannot be
// reached (refused, reset, timed out: it is down, or restarting), with
// exponential backoff, until ctx ends: the batch processor's export
// timeout (OTEL_BSP_EXPORT_TIMEOUT, 30 s) bounds the wait, and the spans
// ended meanwhile wait in its bounded queue, which drops what overflows
// (Close counts both). The OTLP/HTTP exporter retries the collector's
// own refusals (429, 502, 503, 504) itself, but not a connection that
// fails: a collector that restarts lost every span of its downtime.
func (c *countingExporter) export(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = retryFirst, retryMax
	for {
		err := c.SpanExporter.ExportSpans(ctx, spans)
		if err == nil || !unreachable(err) {
			return err
		}
		wait := b.NextBackOff()
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		c.retries.Add(1)
	}
}

// retryFirst and retryMax are the first and the longest wait between two
// attempts to send spans to a collector that cannot be reached.
const (
	retryFirst = 250 * time.Millisecond
	retryMax   = 5 * time.Second
)

// unreachable says that err is the network's: the collector did not
// answer, as opposed to answering no.
func unreachable(err error) bool {
	var op *net.OpError
	var u *url.Error
	return errors.As(err, &op) || errors.As(err, &u) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
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
