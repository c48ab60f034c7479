package otlp

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/go-usdt/usdt/internal/metrics"
)

// metricsReceiver is an OTLP/HTTP collector of metrics in the test's
// process: it keeps each request's path and its metrics.
type metricsReceiver struct {
	mu      sync.Mutex
	paths   []string
	metrics []*metricpb.Metric
	service string
}

func (r *metricsReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg colmetricpb.ExportMetricsServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, req.URL.Path)
	for _, rm := range msg.ResourceMetrics {
		r.service, _ = attributes(rm.GetResource().GetAttributes())["service.name"].(string)
		for _, sm := range rm.ScopeMetrics {
			r.metrics = append(r.metrics, sm.Metrics...)
		}
	}
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// pushOnce pushes snap, of the service shop, to endpoint as -otlp's
// base URL, once, at Close.
func pushOnce(t *testing.T, endpoint string, snap *metrics.Snapshot) {
	t.Helper()
	m, err := NewMetrics(context.Background(), endpoint, "", "shop", func() *metrics.Snapshot { return snap })
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestMetrics pushes a snapshot and decodes it as a collector does: the
// path the endpoint gives (-otlp's base URL, or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as it is), and the calls, losses
// and durations, with the exported buckets, by code.function.name.
func TestMetrics(t *testing.T) {
	hist := make([]uint64, 64)
	hist[3], hist[5], hist[40] = 2, 3, 1
	snap := &metrics.Snapshot{Lost: 9, Functions: []metrics.Function{
		{Name: "main.handle", Calls: 6, Timed: true, SumNs: 2_500_000_000, Buckets: hist},
		{Name: "jobs:job__done", Calls: 4},
	}}
	for _, c := range []struct {
		name string
		// base is appended to the receiver's URL for -otlp; env, when
		// not empty, for OTEL_EXPORTER_OTLP_METRICS_ENDPOINT.
		base, env string
		path      string
	}{
		{name: "base URL", base: "", path: "/v1/metrics"},
		{name: "base URL with a path", base: "/otlp/", path: "/otlp/v1/metrics"},
		{name: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", env: "/api/v1/otlp/v1/metrics", path: "/api/v1/otlp/v1/metrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("OTEL_SERVICE_NAME", "")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
			t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
			r := &metricsReceiver{}
			srv := httptest.NewServer(http.HandlerFunc(r.serve))
			defer srv.Close()
			endpoint := srv.URL + c.base
			if c.env != "" {
				t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", srv.URL+c.env)
				// Nobody listens there: the variable wins.
				endpoint = "http://127.0.0.1:1"
			}
			pushOnce(t, endpoint, snap)
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.paths) != 1 || r.paths[0] != c.path {
				t.Errorf("requests to %q, want one to %q", r.paths, c.path)
			}
			if r.service != "shop" {
				t.Errorf("service.name %q, want shop", r.service)
			}
			byName := map[string]*metricpb.Metric{}
			for _, m := range r.metrics {
				byName[m.GetName()] = m
			}
			calls := map[string]int64{}
			for _, dp := range byName["usdt.function.calls"].GetSum().GetDataPoints() {
				calls[attributes(dp.GetAttributes())["code.function.name"].(string)] = dp.GetAsInt()
			}
			if sum := byName["usdt.function.calls"].GetSum(); !sum.GetIsMonotonic() || sum.GetAggregationTemporality() != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
				t.Errorf("usdt.function.calls is not a cumulative monotonic sum: %v", sum)
			}
			if len(calls) != 2 || calls["main.handle"] != 6 || calls["jobs:job__done"] != 4 {
				t.Errorf("usdt.function.calls = %v, want main.handle 6 and jobs:job__done 4", calls)
			}
			if lost := byName["usdt.events.lost"].GetSum().GetDataPoints(); len(lost) != 1 || lost[0].GetAsInt() != 9 {
				t.Errorf("usdt.events.lost = %v, want 9", lost)
			}
			dur := byName["usdt.function.duration"]
			if dur.GetUnit() != "s" || len(dur.GetHistogram().GetDataPoints()) != 1 {
				t.Fatalf("usdt.function.duration: %v, want a histogram in s of main.handle", dur)
			}
			dp := dur.GetHistogram().GetDataPoints()[0]
			if name := attributes(dp.GetAttributes())["code.function.name"]; name != "main.handle" {
				t.Errorf("histogram of %v, want main.handle", name)
			}
			wantCounts := make([]uint64, 18)
			wantCounts[0], wantCounts[1], wantCounts[17] = 2, 3, 1
			if dp.GetCount() != 6 || math.Abs(dp.GetSum()-2.5) > 1e-12 || !slices.Equal(dp.GetExplicitBounds(), metrics.Bounds()) || !slices.Equal(dp.GetBucketCounts(), wantCounts) {
				t.Errorf("histogram count %d sum %g bounds %v counts %v, want 6, 2.5, %v and %v", dp.GetCount(), dp.GetSum(), dp.GetExplicitBounds(), dp.GetBucketCounts(), metrics.Bounds(), wantCounts)
			}
		})
	}
}

// TestMetricsRejects refuses an -otlp that is not a base URL.
func TestMetricsRejects(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	if _, err := NewMetrics(context.Background(), "127.0.0.1:4318", "", "shop", func() *metrics.Snapshot { return nil }); err == nil {
		t.Error("NewMetrics took 127.0.0.1:4318, a URL without scheme")
	}
}

// TestMetricsEvents pushes what trace counted from -otlp's events, as a
// collector decodes it: usdt.function.errors of the functions whose last
// result is an error alone, usdt.spans.dropped by reason, and neither
// usdt.events.lost nor usdt.processes.traced, which the events do not
// tell.
func TestMetricsEvents(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	hist := make([]uint64, 64)
	hist[12] = 4
	trace, span := [16]byte{0x4b, 15: 1}, [8]byte{7: 9}
	snap := &metrics.Snapshot{Events: true, Functions: []metrics.Function{
		{Name: "main.get", Calls: 5, CountsErrors: true, Errors: 2},
		{Name: "main.sum", Calls: 4, Timed: true, SumNs: 10000, Buckets: hist,
			Exemplars: []metrics.Exemplar{{TraceID: trace, SpanID: span, Ns: 2500, Time: time.Unix(1700000000, 0)}}},
	}, SpansDropped: map[string]uint64{"export_failed": 7, "refused": 1}}
	r := &metricsReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	defer srv.Close()
	pushOnce(t, srv.URL, snap)
	r.mu.Lock()
	defer r.mu.Unlock()
	byName := map[string]*metricpb.Metric{}
	for _, m := range r.metrics {
		byName[m.GetName()] = m
	}
	sums := func(name, key string) map[string]int64 {
		got := map[string]int64{}
		for _, dp := range byName[name].GetSum().GetDataPoints() {
			got[attributes(dp.GetAttributes())[key].(string)] = dp.GetAsInt()
		}
		return got
	}
	if errs := sums("usdt.function.errors", "code.function.name"); len(errs) != 1 || errs["main.get"] != 2 {
		t.Errorf("usdt.function.errors = %v, want main.get 2 alone", errs)
	}
	if dropped := sums("usdt.spans.dropped", "reason"); len(dropped) != 2 || dropped["export_failed"] != 7 || dropped["refused"] != 1 {
		t.Errorf("usdt.spans.dropped = %v, want export_failed 7, refused 1", dropped)
	}
	for _, name := range []string{"usdt.events.lost", "usdt.processes.traced"} {
		if m, ok := byName[name]; ok {
			t.Errorf("%s pushed from events, which do not tell it: %v", name, m)
		}
	}
	dps := byName["usdt.function.duration"].GetHistogram().GetDataPoints()
	if len(dps) != 1 || len(dps[0].GetExemplars()) != 1 {
		t.Fatalf("usdt.function.duration: %v, want main.sum's with one exemplar", dps)
	}
	if e := dps[0].GetExemplars()[0]; !slices.Equal(e.GetTraceId(), trace[:]) || !slices.Equal(e.GetSpanId(), span[:]) || e.GetAsDouble() != 2.5e-6 || e.GetTimeUnixNano() != 1700000000e9 {
		t.Errorf("exemplar %v, want trace %x span %x, 2.5e-06 s, at 1700000000 s", e, trace, span)
	}
}
