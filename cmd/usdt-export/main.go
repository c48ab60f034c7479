// Command usdt-export is usdt-toolexec trace with its exporters: trace
// -otlp URL sends every traced call as an OpenTelemetry span, trace -pprof
// FILE writes a pprof profile of the calls. usdt-toolexec trace runs it
// (from beside itself, or $PATH) when given either, with the same
// arguments:
//
//	usdt-toolexec trace -otlp http://127.0.0.1:4318 -- ./shop
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
	"time"

	"github.com/go-usdt/usdt/internal/export/otlp"
	"github.com/go-usdt/usdt/internal/export/pprof"
	"github.com/go-usdt/usdt/internal/trace"
	"github.com/go-usdt/usdt/internal/tracecmd"
)

func main() {
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
	if bin == "" {
		p, err := exec.LookPath(opt.Command[0])
		if err != nil {
			return err
		}
		bin = p
	}
	// /proc/PID/exe names the process's executable only while it runs.
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	var sinks []func(*trace.Event)
	var spans *otlp.Exporter
	if x.OTLP != "" {
		var err error
		if spans, err = otlp.New(context.Background(), x.OTLP, x.Service, filepath.Base(bin)); err != nil {
			return err
		}
		spans.MinSpan = x.MinSpan
		sinks = append(sinks, spans.Event)
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
		ctx, cancel := context.WithTimeout(context.Background(), flushWithin)
		if cerr := spans.Close(ctx); cerr != nil {
			fmt.Fprintln(stderr, "usdt-toolexec trace: -otlp:", cerr)
		}
		cancel()
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
