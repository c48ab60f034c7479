package otlp

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/go-usdt/usdt/internal/metrics"
)

// Metrics pushes what trace -stats counts as OTLP metrics, through the
// SDK's periodic reader and OTLP/HTTP exporter: per function,
// usdt.function.calls (a cumulative, monotonic sum) and
// usdt.function.duration (an explicit-bounds histogram in seconds, the
// buckets of metrics.Bounds), with the attribute code.function.name, and
// the tracer's usdt.events.lost. Prometheus's OTLP receiver names them
// usdt_function_calls_total, usdt_function_duration_seconds and
// usdt_events_lost_total, labelled code_function_name, as its scrape of
// trace -metrics does.
//
// The counts are already aggregated, in the program or the kernel, and
// the metrics API has no asynchronous histogram: a synchronous one would
// need each call's duration again. So the three come from a Producer,
// which hands the reader data points made from the latest snapshot, all
// three of one snapshot, so that a function's calls and its histogram's
// count agree in every export.
type Metrics struct {
	endpoint string
	provider *sdkmetric.MeterProvider
	errs     errorHandler
}

// NewMetrics starts pushing src's snapshots to the collector at
// endpoint, a base URL as OTEL_EXPORTER_OTLP_ENDPOINT takes it (the
// metrics go to its /v1/metrics), or, where it is set, to
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, every OTEL_METRIC_EXPORT_INTERVAL
// (60 s by default) and at Close. The other OTEL_* variables of the SDK
// and the exporter apply. service and fallback name the service as for
// New.
func NewMetrics(ctx context.Context, endpoint, service, fallback string, src func() *metrics.Snapshot) (*Metrics, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-otlp %s: want the collector's base URL, such as http://127.0.0.1:4318", endpoint)
	}
	// An option wins over the environment: the variable's URL is the
	// exporter's to read, as it is, path included.
	var opts []otlpmetrichttp.Option
	if os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") == "" {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/metrics"
		opts = append(opts, otlpmetrichttp.WithEndpointURL(u.String()))
	} else {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
	}
	client, err := otlpmetrichttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("-otlp %s: %w", endpoint, err)
	}
	// The counts are of every process traced: their resource is trace's
	// (1 to 4 of process.go's order), of no one process.
	res, err := baseResource(ctx, service, fallback)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	m := &Metrics{endpoint: endpoint}
	otel.SetErrorHandler(&m.errs)
	p := &producer{src: src, start: time.Now()}
	m.provider = sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(client, sdkmetric.WithProducer(p))),
	)
	return m, nil
}

// Close pushes the last snapshot and stops, within ctx.
func (m *Metrics) Close(ctx context.Context) error {
	if err := m.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics not sent to %s: %w", m.endpoint, err)
	}
	if err := m.errs.first(); err != nil {
		return fmt.Errorf("metrics not sent to %s while tracing: %w", m.endpoint, err)
	}
	return nil
}

// producer makes the data points of the latest snapshot.
type producer struct {
	src func() *metrics.Snapshot
	// start is when the cumulative counts began: the trace's start.
	start time.Time
}

var scope = instrumentation.Scope{Name: "github.com/go-usdt/usdt/cmd/usdt-toolexec"}

func (p *producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	snap := p.src()
	if snap == nil {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{Scope: scope, Metrics: dataPoints(snap, p.start, time.Now())}}, nil
}

// dataPoints are the metrics of snap, counted from start to now.
func dataPoints(snap *metrics.Snapshot, start, now time.Time) []metricdata.Metrics {
	calls := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
	errs := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
	dur := metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality}
	bounds := metrics.Bounds()
	for _, fn := range snap.Functions {
		attrs := attribute.NewSet(attribute.String("code.function.name", fn.Name))
		calls.DataPoints = append(calls.DataPoints, metricdata.DataPoint[int64]{Attributes: attrs, StartTime: start, Time: now, Value: int64(fn.Calls)})
		if fn.CountsErrors {
			errs.DataPoints = append(errs.DataPoints, metricdata.DataPoint[int64]{Attributes: attrs, StartTime: start, Time: now, Value: int64(fn.Errors)})
		}
		if !fn.Timed {
			continue
		}
		counts := fn.BucketCounts()
		var n uint64
		for _, c := range counts {
			n += c
		}
		var ex []metricdata.Exemplar[float64]
		for _, e := range fn.Exemplars {
			ex = append(ex, metricdata.Exemplar[float64]{Time: e.Time, Value: float64(e.Ns) / 1e9, SpanID: e.SpanID[:], TraceID: e.TraceID[:]})
		}
		dur.DataPoints = append(dur.DataPoints, metricdata.HistogramDataPoint[float64]{
			Attributes: attrs, StartTime: start, Time: now,
			Count: n, Sum: fn.Sum(), Bounds: bounds, BucketCounts: counts, Exemplars: ex,
		})
	}
	lost := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{
		{StartTime: start, Time: now, Value: int64(snap.Lost)},
	}}
	processes := metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{
		{StartTime: start, Time: now, Value: int64(snap.Processes)},
	}}
	out := []metricdata.Metrics{
		{Name: "usdt.function.calls", Description: "Calls of the function, counted by its probes.", Unit: "{call}", Data: calls},
	}
	// Counted from events, trace does not know these two.
	if !snap.Events {
		out = append(out,
			metricdata.Metrics{Name: "usdt.events.lost", Description: "Events the tracer lost: a buffer of the process was full.", Unit: "{event}", Data: lost},
			metricdata.Metrics{Name: "usdt.processes.traced", Description: "Processes the tracer traces now.", Unit: "{process}", Data: processes})
	}
	if len(errs.DataPoints) > 0 {
		out = append(out, metricdata.Metrics{Name: "usdt.function.errors", Description: "Calls of the function whose last result, an error, was not nil.", Unit: "{call}", Data: errs})
	}
	if snap.SpansDropped != nil {
		dropped := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
		for _, reason := range slices.Sorted(maps.Keys(snap.SpansDropped)) {
			dropped.DataPoints = append(dropped.DataPoints, metricdata.DataPoint[int64]{
				Attributes: attribute.NewSet(attribute.String("reason", reason)), StartTime: start, Time: now, Value: int64(snap.SpansDropped[reason]),
			})
		}
		out = append(out, metricdata.Metrics{Name: "usdt.spans.dropped", Description: "Spans that did not reach the collector, by reason.", Unit: "{span}", Data: dropped})
	}
	if len(dur.DataPoints) > 0 {
		out = append(out, metricdata.Metrics{Name: "usdt.function.duration", Description: "How long the function's calls took, from its entry probe to its exit probe.", Unit: "s", Data: dur})
	}
	return out
}
