package prom

import (
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/go-usdt/usdt/internal/metrics"
)

// TestServe serves snapshots and reads them back as Prometheus parses
// its text: each function's calls, its durations' histogram with
// cumulative buckets at every second power of two of ns and their sum in
// seconds, the losses, and the processes traced.
func TestServe(t *testing.T) {
	hist := make([]uint64, 64)
	hist[1], hist[3], hist[4], hist[5], hist[40] = 1, 2, 3, 4, 1
	for _, c := range []struct {
		name  string
		snap  *metrics.Snapshot
		calls map[string]float64
		lost  []float64
		procs []float64
		// hist is main.handle's histogram, when it has one.
		count   uint64
		sum     float64
		buckets map[float64]uint64 // upper bound: cumulative count, for the bounds named
	}{
		{name: "before the first snapshot"},
		{
			name: "calls, durations and losses",
			snap: &metrics.Snapshot{Lost: 7, Processes: 3, Functions: []metrics.Function{
				{Name: "main.handle", Calls: 11, Timed: true, SumNs: 3_000_000, Buckets: hist},
				{Name: "jobs:job__done", Calls: 4},
			}},
			calls:   map[string]float64{"main.handle": 11, "jobs:job__done": 4},
			lost:    []float64{7},
			procs:   []float64{3},
			count:   11,
			sum:     0.003,
			buckets: map[float64]uint64{16e-9: 6, 64e-9: 10, 256e-9: 10, math.Ldexp(1, 36) / 1e9: 10, math.Inf(1): 11},
		},
		{
			name:  "nothing counted yet",
			snap:  &metrics.Snapshot{Functions: []metrics.Function{{Name: "main.handle", Timed: true, Buckets: make([]uint64, 64)}}},
			calls: map[string]float64{"main.handle": 0},
			lost:  []float64{0},
			procs: []float64{0},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			families := scrape(t, c.snap)
			calls := map[string]float64{}
			for _, m := range families["usdt_function_calls_total"].GetMetric() {
				calls[label(m, "code_function_name")] = m.GetCounter().GetValue()
			}
			if len(calls) != len(c.calls) {
				t.Errorf("usdt_function_calls_total = %v, want %v", calls, c.calls)
			}
			for name, n := range c.calls {
				if calls[name] != n {
					t.Errorf("usdt_function_calls_total{code_function_name=%q} = %v, want %v", name, calls[name], n)
				}
			}
			var lost []float64
			for _, m := range families["usdt_events_lost_total"].GetMetric() {
				lost = append(lost, m.GetCounter().GetValue())
			}
			if len(lost) != len(c.lost) || len(lost) == 1 && lost[0] != c.lost[0] {
				t.Errorf("usdt_events_lost_total = %v, want %v", lost, c.lost)
			}
			var procs []float64
			for _, m := range families["usdt_processes_traced"].GetMetric() {
				procs = append(procs, m.GetGauge().GetValue())
			}
			if len(procs) != len(c.procs) || len(procs) == 1 && procs[0] != c.procs[0] {
				t.Errorf("usdt_processes_traced = %v, want %v", procs, c.procs)
			}
			hists := families["usdt_function_duration_seconds"].GetMetric()
			if c.snap == nil {
				if len(hists) != 0 {
					t.Errorf("usdt_function_duration_seconds has %d series before the first snapshot", len(hists))
				}
				return
			}
			if len(hists) != 1 || label(hists[0], "code_function_name") != "main.handle" {
				t.Fatalf("usdt_function_duration_seconds has %d series, want main.handle's alone", len(hists))
			}
			h := hists[0].GetHistogram()
			if h.GetSampleCount() != c.count || math.Abs(h.GetSampleSum()-c.sum) > 1e-12 {
				t.Errorf("histogram count %d sum %g, want %d and %g", h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
			}
			// 17 bounds; the parser adds +Inf.
			if got := len(h.GetBucket()); got != 17 && got != 18 {
				t.Errorf("%d buckets, want the 17 bounds (and +Inf)", got)
			}
			got := map[float64]uint64{math.Inf(1): h.GetSampleCount()}
			for _, b := range h.GetBucket() {
				got[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			for le, n := range c.buckets {
				if g, ok := got[le]; !ok || g != n {
					t.Errorf("bucket le=%g: %d (present %v), want %d", le, g, ok, n)
				}
			}
		})
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// scrape serves snap, reads /metrics once, and parses it as Prometheus
// does its text.
func scrape(t *testing.T, snap *metrics.Snapshot) map[string]*dto.MetricFamily {
	t.Helper()
	s, err := Serve("127.0.0.1:0", func() *metrics.Snapshot { return snap })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// TestServeEvents serves what trace counted from -otlp's events: the
// errors of the functions whose last result is an error, and of no
// other, the spans dropped by reason, and no losses or processes, which
// the events do not tell.
func TestServeEvents(t *testing.T) {
	families := scrape(t, &metrics.Snapshot{
		Events: true,
		Functions: []metrics.Function{
			{Name: "main.get", Calls: 5, CountsErrors: true, Errors: 2},
			{Name: "main.put", Calls: 3, CountsErrors: true},
			{Name: "main.sum", Calls: 4},
		},
		SpansDropped: map[string]uint64{"export_failed": 9, "refused": 0},
	})
	errs := map[string]float64{}
	for _, m := range families["usdt_function_errors_total"].GetMetric() {
		errs[label(m, "code_function_name")] = m.GetCounter().GetValue()
	}
	if len(errs) != 2 || errs["main.get"] != 2 || errs["main.put"] != 0 {
		t.Errorf("usdt_function_errors_total = %v, want main.get 2 and main.put 0 alone", errs)
	}
	dropped := map[string]float64{}
	for _, m := range families["usdt_spans_dropped_total"].GetMetric() {
		dropped[label(m, "reason")] = m.GetCounter().GetValue()
	}
	if len(dropped) != 2 || dropped["export_failed"] != 9 || dropped["refused"] != 0 {
		t.Errorf("usdt_spans_dropped_total = %v, want export_failed 9, refused 0", dropped)
	}
	for _, name := range []string{"usdt_events_lost_total", "usdt_processes_traced"} {
		if f, ok := families[name]; ok {
			t.Errorf("%s served from events, which do not tell it: %v", name, f)
		}
	}
}

// TestServeExemplars: scraped as OpenMetrics, which Prometheus asks for,
// a histogram's buckets carry the spans sent as exemplars, each in the
// bucket of its duration, with trace_id and span_id; the text format,
// which has no exemplars, is served as before.
func TestServeExemplars(t *testing.T) {
	hist := make([]uint64, 64)
	hist[12] = 2
	trace := [16]byte{0x4b, 0xf9, 15: 0x01}
	snap := &metrics.Snapshot{Events: true, Functions: []metrics.Function{{
		Name: "main.get", Calls: 2, Timed: true, SumNs: 5000, Buckets: hist,
		Exemplars: []metrics.Exemplar{{TraceID: trace, SpanID: [8]byte{7: 9}, Ns: 2500, Time: time.Unix(1700000000, 0)}},
	}}}
	s, err := Serve("127.0.0.1:0", func() *metrics.Snapshot { return snap })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(accept string) string {
		req, _ := http.NewRequest("GET", "http://"+s.Addr()+"/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	om := get("application/openmetrics-text; version=1.0.0")
	// The exemplar's labels come in either order (client_golang takes
	// them from a map).
	bucket := `usdt_function_duration_seconds_bucket{code_function_name="main.get",le="4.096e-06"} 2 # `
	ids := []string{`trace_id="4bf90000000000000000000000000001"`, `span_id="0000000000000009"`}
	want := []string{
		bucket + "{" + ids[0] + "," + ids[1] + "} 2.5e-06 1.7e+09\n",
		bucket + "{" + ids[1] + "," + ids[0] + "} 2.5e-06 1.7e+09\n",
	}
	if !strings.Contains(om, want[0]) && !strings.Contains(om, want[1]) {
		t.Errorf("OpenMetrics scrape lacks\n%s(or its labels the other way round) in\n%s", want[0], om)
	}
	if text := get(""); strings.Contains(text, "trace_id") || !strings.Contains(text, `usdt_function_duration_seconds_bucket{code_function_name="main.get",le="4.096e-06"} 2`) {
		t.Errorf("text scrape:\n%s", text)
	}
}
