package otlp

import (
	"context"
	"os"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// observability is the variable that turns on the SDK's metrics of its
// own components (experimental in the Go SDK), which alone count the
// spans the batch processor's full queue drops.
const observability = "OTEL_GO_X_OBSERVABILITY"

// queueFullMetric is the SDK's count of the spans its processors took
// (semantic conventions' otel.sdk.processor.span.processed), with
// error.type queue_full for those the queue had no room for.
const queueFullMetric = "otel.sdk.processor.span.processed"

// watchedBatch makes the batch processor of spans to exporter, with its
// own metrics read by the returned reader, so that the spans its queue
// drops are counted while trace runs (queueFull). The SDK reads the
// variable and the global meter provider as it makes the processor: the
// variable is set for that moment alone, so that the commands trace runs
// do not inherit it.
func watchedBatch(exporter sdktrace.SpanExporter, opts ...sdktrace.BatchSpanProcessorOption) (sdktrace.SpanProcessor, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	old, had := os.LookupEnv(observability)
	os.Setenv(observability, "true")
	bsp := sdktrace.NewBatchSpanProcessor(exporter, opts...)
	if had {
		os.Setenv(observability, old)
	} else {
		os.Unsetenv(observability)
	}
	return bsp, reader
}

// queueFull is how many spans the batch processor's full queue has
// dropped, as its own metrics count them.
func queueFull(reader *sdkmetric.ManualReader) uint64 {
	var rm metricdata.ResourceMetrics
	if reader == nil || reader.Collect(context.Background(), &rm) != nil {
		return 0
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != queueFullMetric || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, ok := dp.Attributes.Value("error.type"); ok && v.AsString() == "queue_full" {
					n += dp.Value
				}
			}
		}
	}
	return uint64(max(0, n))
}
