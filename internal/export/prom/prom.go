// Package prom serves what trace -stats counts for Prometheus to scrape
// (trace -stats -metrics ADDR): per function, usdt_function_calls_total
// and usdt_function_duration_seconds (a histogram of the classic buckets
// metrics.Bounds gives), labelled with the function's fully qualified
// name (code_function_name, from OpenTelemetry's code.function.name), and
// the tracer's own usdt_events_lost_total and usdt_processes_traced. Counted
// from -otlp's events (metrics.Tally), they are usdt_function_errors_total
// too, of the functions whose last result is an error, and
// usdt_spans_dropped_total by reason, without the two the events do not
// tell. The text is client_golang's.
package prom

import (
	"context"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/go-usdt/usdt/internal/metrics"
)

// Source returns the latest snapshot, or nil before the first.
type Source func() *metrics.Snapshot

var (
	callsDesc = prometheus.NewDesc("usdt_function_calls_total", "Calls of the function, counted by its probes.", []string{"code_function_name"}, nil)
	durDesc   = prometheus.NewDesc("usdt_function_duration_seconds", "How long the function's calls took, from its entry probe to its exit probe.", []string{"code_function_name"}, nil)
	lostDesc  = prometheus.NewDesc("usdt_events_lost_total", "Events the tracer lost: a buffer of the process was full.", nil, nil)
	procsDesc = prometheus.NewDesc("usdt_processes_traced", "Processes the tracer traces now.", nil, nil)
	errsDesc  = prometheus.NewDesc("usdt_function_errors_total", "Calls of the function whose last result, an error, was not nil.", []string{"code_function_name"}, nil)
	dropDesc  = prometheus.NewDesc("usdt_spans_dropped_total", "Spans that did not reach the collector, by reason.", []string{"reason"}, nil)
)

// collector is a prometheus.Collector of a Source.
type collector struct{ src Source }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- callsDesc
	ch <- durDesc
	ch <- lostDesc
	ch <- procsDesc
	ch <- errsDesc
	ch <- dropDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src()
	if snap == nil {
		return
	}
	if !snap.Events {
		ch <- prometheus.MustNewConstMetric(lostDesc, prometheus.CounterValue, float64(snap.Lost))
		ch <- prometheus.MustNewConstMetric(procsDesc, prometheus.GaugeValue, float64(snap.Processes))
	}
	for reason, n := range snap.SpansDropped {
		ch <- prometheus.MustNewConstMetric(dropDesc, prometheus.CounterValue, float64(n), reason)
	}
	bounds := metrics.Bounds()
	for _, fn := range snap.Functions {
		ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.CounterValue, float64(fn.Calls), fn.Name)
		if fn.CountsErrors {
			ch <- prometheus.MustNewConstMetric(errsDesc, prometheus.CounterValue, float64(fn.Errors), fn.Name)
		}
		if !fn.Timed {
			continue
		}
		buckets := make(map[float64]uint64, len(bounds))
		var count uint64
		for i, n := range fn.BucketCounts() {
			count += n
			if i < len(bounds) {
				buckets[bounds[i]] = count
			}
		}
		h := prometheus.MustNewConstHistogram(durDesc, count, fn.Sum(), buckets, fn.Name)
		if len(fn.Exemplars) > 0 {
			h = withExemplars(h, fn.Exemplars)
		}
		ch <- h
	}
}

// withExemplars is h with the spans of ex as its buckets' exemplars, as
// OpenMetrics has them: the labels trace_id and span_id, the call's
// duration in seconds, and when it returned. client_golang puts each in
// the bucket of its value.
func withExemplars(h prometheus.Metric, ex []metrics.Exemplar) prometheus.Metric {
	pe := make([]prometheus.Exemplar, len(ex))
	for i, e := range ex {
		pe[i] = prometheus.Exemplar{
			Value:     float64(e.Ns) / 1e9,
			Labels:    prometheus.Labels{"trace_id": hex.EncodeToString(e.TraceID[:]), "span_id": hex.EncodeToString(e.SpanID[:])},
			Timestamp: e.Time,
		}
	}
	m, err := prometheus.NewMetricWithExemplars(h, pe...)
	if err != nil {
		return h
	}
	return m
}

// Server serves the metrics of a Source over HTTP, at /metrics.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Serve listens on addr (host:port; port 0 picks one) and serves src's
// metrics at /metrics until Close.
func Serve(addr string, src Source) (*Server, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collector{src}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// OpenMetrics, where the scraper asks for it, carries the exemplars.
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is where the server listens.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving, after the scrapes under way, for at most a second.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
