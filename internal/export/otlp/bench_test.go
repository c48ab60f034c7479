package otlp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// BenchmarkExport is the export path after the ring's records are
// decoded: each iteration is one call, its entry and exit events as the
// tracer hands them over (an argument, a result), through the call tree
// and the SDK's batch processor to OTLP/HTTP protobuf at a receiver that
// reads and discards them. The calls are 64 to a root call, on 8
// goroutines in turn. The timer stops once Close has sent the last span;
// spans/s is the export's rate, and dropped/span the share of them
// that its full queue dropped: a rate counts only where that is 0. Run it on one core
// (-cpu 1): scripts/bench-export.sh.
//
// The sub-benchmark sdk is the floor under it: the same spans (their
// names, times, parents and attributes) made straight with the SDK,
// through the same batch processor and exporter, with no events and no
// call tree, its queue blocking the spans' ends when full.
func BenchmarkExport(b *testing.B) {
	b.Setenv("OTEL_SERVICE_NAME", "")
	b.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	procfs = b.TempDir()
	b.Cleanup(func() { procfs = "/proc" })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		// An empty ExportTraceServiceResponse is no bytes.
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	b.Run("usdt", func(b *testing.B) { benchEvents(b, srv.URL) })
	b.Run("sdk", func(b *testing.B) { benchSDK(b, srv.URL) })
}

// goroutines and perRoot shape the benchmarks' calls: perRoot calls
// under each root call, on goroutines goroutines in turn.
const goroutines, perRoot = 8, 64

func benchEvents(b *testing.B, url string) {
	e, err := New(context.Background(), url, "", "shop", false)
	if err != nil {
		b.Fatal(err)
	}
	id := i64("id", 42, "42")
	name := str("name", "widget")
	ok := errValue("err", nil, "<nil>")
	at := 0
	open := make([]int, goroutines) // calls made under each open root
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		g := thread(i % goroutines)
		if open[g] == 0 {
			at++
			e.Event(g.enter("main.handle", at, name))
		}
		at++
		e.Event(g.enter("main.(*store).get", at, id))
		at++
		e.Event(g.leave("main.(*store).get", at, 1, name, ok))
		if open[g]++; open[g] == perRoot {
			at++
			e.Event(g.leave("main.handle", at, perRoot*2+1, ok))
			open[g] = 0
		}
	}
	// Close says what it could not send, which dropped/op counts.
	if err := e.Close(context.Background()); err != nil {
		b.Log(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	dropped := uint64(0)
	for _, n := range e.Dropped() {
		dropped += n
	}
	report(b, elapsed, dropped)
}

// report reports the rate of the spans of b.N calls, with their roots,
// and the share of them dropped.
func report(b *testing.B, elapsed time.Duration, dropped uint64) {
	spans := float64(b.N + (b.N+perRoot-1)/perRoot)
	b.ReportMetric(spans/elapsed.Seconds(), "spans/s")
	b.ReportMetric(float64(dropped)/spans, "dropped/span")
}

func benchSDK(b *testing.B, url string) {
	client, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	// Blocking rather than dropping on a full queue: the floor is what
	// the SDK sends, at the rate it can.
	batch, queue := watchedBatch(client, append(batchOptions(), sdktrace.WithBlocking())...)
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(batch), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tracer := provider.Tracer("bench")
	base := time.Now()
	roots := make([]context.Context, goroutines)
	rootSpans := make([]oteltrace.Span, goroutines)
	open := make([]int, goroutines)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		g := i % goroutines
		at := base.Add(time.Duration(i) * time.Microsecond)
		if open[g] == 0 {
			roots[g], rootSpans[g] = tracer.Start(context.Background(), "main.handle", oteltrace.WithTimestamp(at),
				oteltrace.WithAttributes(attribute.String("code.function.name", "main.handle"), attribute.Int64("goroutine", int64(g)), attribute.String("args.name", "widget")))
		}
		_, span := tracer.Start(roots[g], "main.(*store).get", oteltrace.WithTimestamp(at), oteltrace.WithAttributes(
			attribute.String("code.function.name", "main.(*store).get"), attribute.Int64("goroutine", int64(g)),
			attribute.Int64("args.id", 42), attribute.String("results.name", "widget"), attribute.String("results.err", "<nil>")))
		span.End(oteltrace.WithTimestamp(at.Add(time.Microsecond)))
		if open[g]++; open[g] == perRoot {
			rootSpans[g].End(oteltrace.WithTimestamp(at.Add(2 * time.Microsecond)))
			open[g] = 0
		}
	}
	for g, n := range open {
		if n > 0 {
			rootSpans[g].End()
		}
	}
	if err := provider.Shutdown(context.Background()); err != nil {
		b.Log(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	report(b, elapsed, queueFull(queue))
}
