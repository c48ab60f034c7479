// Command usdt-export is usdt-toolexec trace with its exporters: trace
// -otlp URL sends every traced call as an OpenTelemetry span, trace -pprof
// FILE writes a pprof profile of the calls, trace -stats -metrics ADDR
// serves the counts for Prometheus, and trace -stats -otlp URL pushes
// them as OTLP metrics. usdt-toolexec trace runs it (from beside itself,
// or $PATH) when given any of them, with the same arguments:
//
//	usdt-toolexec trace -otlp http://127.0.0.1:4318 -- ./shop
//	usdt-toolexec trace -stats -metrics 127.0.0.1:9464 -- ./shop
//
// The exporters are a command of their own so that usdt-toolexec, which
// the go command starts for every compile of an instrumented build, does
// not link the OpenTelemetry SDK and net/http, nor, through them, cgo.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/go-usdt/usdt/internal/export/otlp"
	"github.com/go-usdt/usdt/internal/export/pprof"
	"github.com/go-usdt/usdt/internal/export/prom"
	"github.com/go-usdt/usdt/internal/export/symtab"
	"github.com/go-usdt/usdt/internal/metrics"
	"github.com/go-usdt/usdt/internal/trace"
	"github.com/go-usdt/usdt/internal/tracecmd"
)

func main() {
	// The exporters hold more than trace alone: the SDK's queue of
	// spans (65,536) and the binary's table of functions. Set before
	// trace.Run, which keeps a limit that is set.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(2 * trace.MemoryLimit)
	}
	os.Exit(tracecmd.Run(os.Args[1:], os.Stdout, os.Stderr, func(opt trace.Options, x tracecmd.Exports) error {
		return export(opt, x, os.Stderr)
	}))
}

// flushWithin bounds the time trace takes to hand its last spans to the
// collector once tracing ends: a tracer never hangs, on an unreachable
// collector included.
const flushWithin = 15 * time.Second

// export traces as opt says, sending every event to the exports x, which
// it flushes when tracing ends.
func export(opt trace.Options, x tracecmd.Exports, stderr io.Writer) error {
	if !x.Any() {
		return trace.Run(opt)
	}
	bin := opt.Binary
	switch {
	case bin == "" && len(opt.Command) > 0:
		p, err := exec.LookPath(opt.Command[0])
		if err != nil {
			return err
		}
		bin = p
	case bin == "":
		// -exe of a path in the processes' roots only: its name
		// names the service, and there is no table to read here.
		bin = opt.Exe
	}
	// /proc/PID/exe names the process's executable only while it runs.
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	if opt.Stats {
		return exportCounts(opt, x, filepath.Base(bin), stderr)
	}
	var sinks []func(*trace.Event)
	var spans *otlp.Exporter
	if x.OTLP != "" {
		var err error
		if spans, err = otlp.New(context.Background(), x.OTLP, x.Service, filepath.Base(bin), opt.Block > 0); err != nil {
			return err
		}
		spans.MinSpan = x.MinSpan
		if x.Sample < 1 {
			spans.Sampler = otlp.Ratio(x.Sample)
			// The program samples as it writes, where it can: a
			// call it leaves out costs it no event.
			opt.Sampling, opt.Sample = true, x.Sample
		}
		// Read now: a traced process's /proc/PID/exe goes when it exits.
		// A binary whose table cannot be read gives spans without their
		// functions' files and lines.
		if spans.Functions, err = symtab.Open(bin); err != nil && opt.Verbose {
			fmt.Fprintf(stderr, "usdt-toolexec trace: -otlp: spans without code.file.path: %v\n", err)
		}
		sinks = append(sinks, spans.Event)
		opt.Started = spans.Started
	}
	// -otlp's calls counted from their events, as they come: served with
	// -metrics, and pushed where OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
	// names a metrics collector (-otlp's URL takes spans: Jaeger, for
	// one, takes no metrics).
	// counted counts a call that the program's sampling left out, from
	// its compact record, in the metrics.
	var counted func(trace.Counted)
	// left is what the program counted of the calls its sampling left
	// out.
	var left atomic.Pointer[metrics.Snapshot]
	var pushed *otlp.Metrics
	push := spans != nil && os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
	if x.Metrics != "" || push {
		var tally metrics.Tally
		src := func() *metrics.Snapshot {
			s := tally.Snapshot()
			if l := left.Load(); l != nil {
				s = metrics.Sum(s, l)
				s.Events = true
			}
			if spans != nil {
				s.SpansDropped = spans.Dropped()
			}
			return s
		}
		if x.Metrics != "" {
			srv, err := serveMetrics(x.Metrics, src, opt.Verbose, stderr)
			if err != nil {
				return err
			}
			defer srv.Close()
		}
		if push {
			var err error
			if pushed, err = otlp.NewMetrics(context.Background(), x.OTLP, x.Service, filepath.Base(bin), src); err != nil {
				return err
			}
		}
		sinks = append(sinks, func(ev *trace.Event) { countCall(&tally, ev) })
		counted = func(c trace.Counted) { tally.Call(c.Name, c.Timed, c.Ns, c.ErrResult, c.Failed) }
		if spans != nil {
			// The spans sent are the histograms' exemplars.
			spans.Sent = func(fn string, elapsed time.Duration, sc oteltrace.SpanContext, end time.Time) {
				tally.Exemplar(fn, metrics.Exemplar{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Ns: uint64(max(0, elapsed)), Time: end})
			}
		}
	}
	if opt.Sampling {
		// A call the program left out is in a trace that -sample, or
		// its caller, did not sample, as the exporter counts those it
		// drops itself; and a call the metrics count.
		opt.Counts = left.Store
		opt.LeftOut = func(calls, byCaller uint64) {
			byCaller = min(byCaller, calls)
			spans.SampledOut(int(calls-byCaller), int(byCaller))
		}
		opt.Counted = func(c trace.Counted) {
			if c.ByCaller {
				spans.SampledOut(0, 1)
			} else {
				spans.SampledOut(1, 0)
			}
			if counted != nil {
				counted(c)
			}
		}
	}
	var prof *pprof.Profile
	var out *os.File
	if x.Pprof != "" {
		var err error
		if prof, err = pprof.New(bin); err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
		// Created now, so that a path it cannot write fails before tracing.
		if out, err = os.Create(x.Pprof); err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
		defer out.Close()
		sinks = append(sinks, prof.Event)
	}
	opt.Events = func(ev *trace.Event) {
		for _, sink := range sinks {
			sink(ev)
		}
	}
	err := trace.Run(opt)
	if spans != nil {
		flush(spans.Close, stderr)
	}
	// After the spans' flush, which counts what it could not send.
	if pushed != nil {
		flush(pushed.Close, stderr)
	}
	if prof != nil {
		werr := prof.Write(out)
		if cerr := out.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			err = errors.Join(err, fmt.Errorf("-pprof %s: %w", x.Pprof, werr))
		}
	}
	return err
}

// countCall counts ev's call in tally, as -stats counts calls: an
// automatic probe's at its exit, timed, or at its entry where its exit is
// not traced, and a usdtgen probe's fire. An exit whose last result is an
// error counts it too, when it is not nil.
func countCall(tally *metrics.Tally, ev *trace.Event) {
	switch {
	case ev.Function == "":
		tally.Call(ev.Label(), false, 0, false, false)
	case ev.Exit:
		// The last result alone: the exit's other values are decoded
		// only if a span needs them.
		errResult, failed := ev.LastError()
		tally.Call(ev.Function, true, uint64(max(0, ev.Elapsed)), errResult, failed)
	case !ev.Paired:
		tally.Call(ev.Function, false, 0, false, false)
	}
}

// exportCounts traces with -stats, serving the counts for Prometheus
// (-metrics) and pushing them as OTLP metrics (-otlp) while it runs, and
// their last values at the end: the last scrape before trace exits sees
// them, and the OTLP exporter pushes them as it stops.
func exportCounts(opt trace.Options, x tracecmd.Exports, service string, stderr io.Writer) error {
	var snap atomic.Pointer[metrics.Snapshot]
	opt.Counts = snap.Store
	if x.Metrics != "" {
		srv, err := serveMetrics(x.Metrics, snap.Load, opt.Verbose, stderr)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	var pushed *otlp.Metrics
	if x.OTLP != "" {
		var err error
		if pushed, err = otlp.NewMetrics(context.Background(), x.OTLP, x.Service, service, snap.Load); err != nil {
			return err
		}
	}
	err := trace.Run(opt)
	if pushed != nil {
		flush(pushed.Close, stderr)
	}
	return err
}

// flush closes an OTLP exporter, within flushWithin, and reports to
// stderr what it could not send.
// serveMetrics serves src's metrics for Prometheus at addr (-metrics),
// and with verbose says where.
func serveMetrics(addr string, src prom.Source, verbose bool, stderr io.Writer) (*prom.Server, error) {
	srv, err := prom.Serve(addr, src)
	if err != nil {
		return nil, fmt.Errorf("-metrics %s: %w", addr, err)
	}
	if verbose {
		fmt.Fprintf(stderr, "usdt-toolexec trace: metrics at http://%s/metrics\n", srv.Addr())
	}
	return srv, nil
}

func flush(close func(context.Context) error, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), flushWithin)
	defer cancel()
	if err := close(ctx); err != nil {
		fmt.Fprintln(stderr, "usdt-toolexec trace: -otlp:", err)
	}
}
