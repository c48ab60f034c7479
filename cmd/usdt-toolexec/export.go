package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-usdt/usdt/internal/export/otlp"
	"github.com/go-usdt/usdt/internal/export/pprof"
	"github.com/go-usdt/usdt/internal/trace"
)

// exports are where trace sends the calls it sees, besides its output.
type exports struct {
	otlp, service, pprof string
}

// flushWithin bounds the time trace takes to hand its last spans to the
// collector once tracing ends: a tracer never hangs, on an unreachable
// collector included.
const flushWithin = 15 * time.Second

func (x *exports) flags(fs *flag.FlagSet) {
	fs.StringVar(&x.otlp, "otlp", "", "")
	fs.StringVar(&x.service, "service", "", "")
	fs.StringVar(&x.pprof, "pprof", "", "")
}

// check reports flags that make no sense together.
func (x *exports) check() error {
	if x.service != "" && x.otlp == "" {
		return errors.New("-service names the service of -otlp's spans: give -otlp URL too")
	}
	return nil
}

// run traces as opt says, sending every event to the exports, which it
// flushes when tracing ends.
func (x *exports) run(opt trace.Options, stderr io.Writer) error {
	if x.otlp == "" && x.pprof == "" {
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
	if x.otlp != "" {
		var err error
		if spans, err = otlp.New(context.Background(), x.otlp, x.service, filepath.Base(bin)); err != nil {
			return err
		}
		sinks = append(sinks, spans.Event)
	}
	var prof *pprof.Profile
	var out *os.File
	if x.pprof != "" {
		var err error
		if prof, err = pprof.New(bin); err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
		// Created now, so that a path it cannot write fails before tracing.
		if out, err = os.Create(x.pprof); err != nil {
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
			err = errors.Join(err, fmt.Errorf("-pprof %s: %w", x.pprof, werr))
		}
	}
	return err
}
