// Package tracecmd is the command line of usdt-toolexec trace, shared by
// the two commands that run it: usdt-toolexec, which traces by itself, and
// usdt-export, which it runs for -otlp and -pprof. The exporters link the
// OpenTelemetry SDK, net/http and, through them, cgo: in usdt-toolexec,
// every compile of an instrumented build would pay their start-up.
package tracecmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/trace"
	"github.com/go-usdt/usdt/internal/values"
)

// Usage is trace's usage message.
const Usage = `usage: usdt-toolexec trace [-v] [-json] [-latency | -stats [-interval D] [-metrics ADDR]] [-transport ring|bpf] [-attach MODE] [-buffer SIZE] [-block D] [-values=false] [-otlp URL [-service NAME] [-min-span D] [-sample R] [-metrics ADDR]] [-pprof FILE] -p PID [PATTERN...]
       usdt-toolexec trace [-v] [-json] [-latency | -stats [-metrics ADDR]] [-transport ring|bpf] [-attach MODE] [-buffer SIZE] [-block D] [-values=false] [-otlp URL [-service NAME] [-min-span D] [-sample R] [-metrics ADDR]] [-pprof FILE] -exe PATH [PATTERN...]
       usdt-toolexec trace [-v] [-json] [-latency | -stats [-interval D] [-metrics ADDR]] [-transport ring|bpf] [-attach MODE] [-buffer SIZE] [-block D] [-values=false] [-otlp URL [-service NAME] [-min-span D] [-sample R] [-metrics ADDR]] [-pprof FILE] [PATTERN...] -- CMD [ARGS...]

Prints every event of the probes that match a PATTERN (all without one): a
glob on provider:name or on the Go function of an automatic probe
(main.*, 'main.Cache.*'). -json writes one object per event, -latency a
latency histogram per function at the end, -v how it attached. -stats
prints no events: it counts the calls of each function (and the fires of
each provider probe) and their latencies where they fire (in the kernel,
or in the program with the ring), and prints them at the end, and every D
too with -interval D (each time what was counted since the last).
-exe PATH traces every process that runs the executable PATH: those that
run, and those that start later (a restart, a replica), each from when
trace finds it, within 0.1 s of its start, until it exits, and until
Ctrl-C; with -stats, each process's counts print when it ends, and
-metrics and -otlp export the counts of all of them as one, which only
grow as processes come and go. An absolute PATH also matches in each
process's own root (a container's image, a chroot), and need not exist
in trace's.
-metrics ADDR serves what -stats counts for Prometheus at
http://ADDR/metrics while it runs (usdt_function_calls_total and
usdt_function_duration_seconds by code_function_name,
usdt_events_lost_total and usdt_processes_traced); -stats -otlp URL
pushes the same as OTLP metrics, and no spans. Without -stats, -otlp URL
-metrics ADDR serves the calls of the spans, counted by trace from their
events, with usdt_function_errors_total (the calls whose last result, an
error, was not nil) and usdt_spans_dropped_total by reason, and pushes
them to OTEL_EXPORTER_OTLP_METRICS_ENDPOINT where that is set. -attach multi attaches
every probe with one uprobe_multi link (Linux 6.6+), single with one
uprobe per probe, auto (the default) with the first that works. -buffer sets the size of the ring buffer the
events come through, a power of two (256K, 32M, the default, or 1G): a
trace that lost events says so at the end. -block D, through the ring,
has a probe whose buffer is full wait up to D (at most 10s) for trace to
make room instead of dropping its event: the program runs at the pace
trace reads, and a stop of the world waits for a probe that waits; a
trace that stops reading costs each P one wait of D, then drops.
-values=false has the probes read nothing through their arguments'
pointers: a pointer, map or interface shows and is sent as its address,
a string or slice in a struct as its length, what the argument holds
itself (a number, a struct's fields) as it is, a string argument as the
probe copies it. A call then costs the program no reads of its memory.

-transport ring has the probes write their events into a buffer in the
program's own memory, with no trap, as any user who may ptrace the
program (-buffer is then each P's share, 32M by default); bpf attaches a
BPF program, which needs root. Without it, trace records in the process
when the binary has a ring (amd64) and it records every selected probe
(automatic probes that are code, and the usdtgen probes of packages
usdt-toolexec compiled, of at most 8 arguments), else through BPF; not as
root, through the ring whatever it leaves out. -v says which, and why.

-otlp sends every traced call of an automatic probe as an OpenTelemetry
span to the collector at URL (its base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
takes it: http://127.0.0.1:4318), its parent the innermost call open on its
goroutine; the other OTEL_* variables apply. -service sets service.name
(default: the binary's name). -min-span D drops the spans of calls shorter
than D and counts them on the nearest span kept (usdt.dropped_children).
-sample R sends the traces of a share R of the root calls (0.01: 1 in
100), by trace id as OpenTelemetry's TraceIdRatioBased sampler does; a
call that joins its caller's trace (a W3C traceparent) follows that
trace's sampled flag whatever R, and a trace's calls follow its root.
Through the ring on amd64 the program samples as it writes: a call left
out costs it a count, not an event.
With -stats, -otlp sends the counts as OTLP metrics instead, to
OTEL_EXPORTER_OTLP_METRICS_ENDPOINT where that is set, else to URL's
/v1/metrics, every OTEL_METRIC_EXPORT_INTERVAL (60 s) and at the end.
-pprof writes a pprof profile of the calls to FILE: wall time and call
counts per chain of traced calls. With any of them, the events print only
with -json, and trace runs usdt-export (installed beside usdt-toolexec or
on $PATH), which carries the exporters.
`

// Exports are where trace sends the calls it sees, besides its output.
type Exports struct {
	OTLP, Service, Pprof string
	// Metrics is where to serve -stats's counts for Prometheus
	// (host:port).
	Metrics string
	// MinSpan drops the spans of -otlp shorter than it.
	MinSpan time.Duration
	// Sample is the share of root calls whose traces -otlp sends, as
	// the OpenTelemetry SDK's TraceIdRatioBased sampler takes it (1,
	// every one, by default).
	Sample float64
}

// Any reports whether there is an export to make.
func (x Exports) Any() bool {
	return x.OTLP != "" || x.Pprof != "" || x.Metrics != ""
}

func (x *Exports) flags(fs *flag.FlagSet) {
	fs.StringVar(&x.OTLP, "otlp", "", "")
	fs.StringVar(&x.Service, "service", "", "")
	fs.StringVar(&x.Pprof, "pprof", "", "")
	fs.DurationVar(&x.MinSpan, "min-span", 0, "")
	fs.Float64Var(&x.Sample, "sample", 1, "")
	fs.StringVar(&x.Metrics, "metrics", "", "")
}

// check reports flags that make no sense together.
func (x Exports) check() error {
	switch {
	case x.Service != "" && x.OTLP == "":
		return errors.New("-service names the service of -otlp's spans: give -otlp URL too")
	case x.MinSpan < 0:
		return errors.New("-min-span wants a positive duration")
	case x.MinSpan > 0 && x.OTLP == "":
		return errors.New("-min-span drops short spans of -otlp: give -otlp URL too")
	case !(x.Sample >= 0 && x.Sample <= 1):
		return fmt.Errorf("-sample %v: want the share of traces to send, from 0 to 1 (0.01 sends 1 in 100)", x.Sample)
	case x.Sample != 1 && x.OTLP == "":
		return errors.New("-sample chooses the traces -otlp sends: give -otlp URL too")
	}
	return nil
}

// Run runs trace with args, the arguments after "trace", and returns its
// exit status. Once the command line is valid, run traces as opt says,
// sending the calls to x.
func Run(args []string, stdout, stderr io.Writer, run func(opt trace.Options, x Exports) error) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage) }
	opt := trace.Options{Stdout: stdout, Stderr: stderr}
	fs.IntVar(&opt.PID, "p", 0, "")
	fs.StringVar(&opt.Exe, "exe", "", "")
	fs.BoolVar(&opt.JSON, "json", false, "")
	fs.BoolVar(&opt.Latency, "latency", false, "")
	fs.BoolVar(&opt.Stats, "stats", false, "")
	fs.DurationVar(&opt.Interval, "interval", 0, "")
	fs.BoolVar(&opt.Verbose, "v", false, "")
	attach := fs.String("attach", string(trace.AttachAuto), "")
	transport := fs.String("transport", string(trace.TransportAuto), "")
	fs.Var((*bufferSize)(&opt.Buffer), "buffer", "")
	fs.DurationVar(&opt.Block, "block", 0, "")
	withValues := fs.Bool("values", true, "")
	var exp Exports
	exp.flags(fs)
	if i := slices.Index(args, "--"); i >= 0 {
		args, opt.Command = args[:i], args[i+1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opt.Patterns = fs.Args()
	opt.NoValues = !*withValues
	opt.Attach = trace.Attach(*attach)
	opt.Transport = trace.Transport(*transport)
	switch {
	case !slices.Contains([]trace.Transport{trace.TransportAuto, trace.TransportBPF, trace.TransportRing}, opt.Transport):
		fmt.Fprintf(stderr, "usdt-toolexec trace: -transport %s: want ring, bpf or auto\n", *transport)
		return 2
	case !slices.Contains([]trace.Attach{trace.AttachAuto, trace.AttachMulti, trace.AttachSingle}, opt.Attach):
		fmt.Fprintf(stderr, "usdt-toolexec trace: -attach %s: want multi, single or auto\n", *attach)
		return 2
	case opt.Stats && opt.Latency:
		fmt.Fprint(stderr, "usdt-toolexec trace: -stats prints latency histograms of its own: drop -latency\n")
		return 2
	case opt.Stats && exp.Pprof != "":
		fmt.Fprint(stderr, "usdt-toolexec trace: -stats counts calls and sees none to profile: drop -pprof\n")
		return 2
	case opt.Stats && exp.MinSpan > 0:
		fmt.Fprint(stderr, "usdt-toolexec trace: -stats sends -otlp its counts as metrics, and no spans: drop -min-span\n")
		return 2
	case opt.Stats && exp.Sample != 1:
		fmt.Fprint(stderr, "usdt-toolexec trace: -stats counts every call and sends -otlp no spans to sample: drop -sample\n")
		return 2
	case opt.Stats && opt.Buffer != 0:
		fmt.Fprint(stderr, "usdt-toolexec trace: -stats counts in the kernel and sends no events through a buffer: drop -buffer\n")
		return 2
	case opt.Block < 0 || opt.Block > ring.MaxBlock:
		fmt.Fprintf(stderr, "usdt-toolexec trace: -block %v: want how long a probe may wait for room, up to %v (100ms, 1s)\n", opt.Block, ring.MaxBlock)
		return 2
	case opt.Stats && opt.NoValues:
		fmt.Fprint(stderr, "usdt-toolexec trace: -stats counts calls and reads no values: drop -values=false\n")
		return 2
	case opt.Stats && opt.Block > 0:
		fmt.Fprint(stderr, "usdt-toolexec trace: -stats counts in place and writes no events to wait for room for: drop -block\n")
		return 2
	case opt.Block > 0 && opt.Transport == trace.TransportBPF:
		fmt.Fprint(stderr, "usdt-toolexec trace: -block waits in the program, for room in its own ring: a BPF program cannot wait: drop -block, or use -transport ring\n")
		return 2
	case exp.Metrics != "" && !opt.Stats && exp.OTLP == "":
		fmt.Fprint(stderr, "usdt-toolexec trace: -metrics serves what -stats counts, or the calls of -otlp's spans: add -stats or -otlp URL\n")
		return 2
	case opt.Interval < 0 || opt.Interval > 0 && !opt.Stats:
		fmt.Fprint(stderr, "usdt-toolexec trace: -interval wants a positive duration, with -stats\n")
		return 2
	case btoi(opt.PID != 0)+btoi(len(opt.Command) > 0)+btoi(opt.Exe != "") != 1:
		fmt.Fprint(stderr, Usage)
		return 2
	case opt.Exe != "" && opt.Interval > 0:
		fmt.Fprint(stderr, "usdt-toolexec trace: -exe prints each process's counts at its end: drop -interval\n")
		return 2
	case exp.check() != nil:
		fmt.Fprintln(stderr, "usdt-toolexec trace:", exp.check())
		return 2
	case opt.Exe != "":
		// As /proc/PID/exe names it: the file, its links resolved. A
		// path that is not in trace's own root names the executable
		// in the processes' roots (a container's image, a chroot):
		// trace has no copy of it to read its symbols from.
		exe, err := filepath.Abs(opt.Exe)
		if err == nil {
			exe, err = filepath.EvalSymlinks(exe)
		}
		switch {
		case err == nil:
			opt.Exe, opt.Binary = exe, exe
		case errors.Is(err, os.ErrNotExist) && filepath.IsAbs(opt.Exe):
			opt.Exe = filepath.Clean(opt.Exe)
			if exp.Pprof != "" {
				fmt.Fprintf(stderr, "usdt-toolexec trace: -exe %s: not here, only in the roots of the processes that run it: -pprof needs the executable here to name their functions\n", values.Escape(opt.Exe))
				return 2
			}
		default:
			fmt.Fprintf(stderr, "usdt-toolexec trace: -exe %s: %v (a path that is only in the processes' roots, as in a container, must be absolute)\n", values.Escape(opt.Exe), err)
			return 1
		}
	case opt.PID != 0:
		opt.Binary = "/proc/" + strconv.Itoa(opt.PID) + "/exe"
		if _, err := os.Stat(opt.Binary); err != nil {
			fmt.Fprintf(stderr, "usdt-toolexec trace: no process %d to trace (%v)\n", opt.PID, err)
			return 1
		}
	}
	return Status(run(opt, exp), stderr, "usdt-toolexec trace:")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Status is the exit status for err: a child's own when err is its exit,
// 128 plus the signal's number when a signal killed it, as a shell
// reports it, else 1 after printing err after prefix, escaped
// (values.EscapeLines): an error may quote what a binary holds, its
// sections' names among them, and goes to the operator's terminal.
func Status(err error, stderr io.Writer, prefix string) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		// ExitCode is -1 for a child a signal killed, which os.Exit
		// would make 255.
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	fmt.Fprintln(stderr, prefix, values.EscapeLines(err.Error()))
	return 1
}

// bufferSize is -buffer's value: bytes, with K, M or G for KiB, MiB and
// GiB, a power of two from a page (4K) to 1G, as a BPF ring buffer is.
type bufferSize int

func (b *bufferSize) String() string { return strconv.Itoa(int(*b)) }

func (b *bufferSize) Set(s string) error {
	num, unit := strings.TrimRight(s, "KMGkmg"), 1
	switch strings.ToUpper(strings.TrimPrefix(s, num)) {
	case "":
	case "K":
		unit = 1 << 10
	case "M":
		unit = 1 << 20
	case "G":
		unit = 1 << 30
	default:
		return fmt.Errorf("%q: want a size such as 256K, 32M or 1G", s)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || n > 1<<30/unit {
		return fmt.Errorf("%q: want a size such as 256K, 32M or 1G", s)
	}
	n *= unit
	if n < 4<<10 || n&(n-1) != 0 {
		lo := 4 << 10
		for lo*2 <= n {
			lo *= 2
		}
		return fmt.Errorf("%q: want a power of two from 4K to 1G, such as %s or %s", s, trace.SizeText(lo), trace.SizeText(lo*2))
	}
	*b = bufferSize(n)
	return nil
}
