package tracecmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/go-usdt/usdt/internal/testing/clitest"
	"github.com/go-usdt/usdt/internal/trace"
)

// TestMain lets the test binary act as two commands the scripts run as
// processes of their own, so that exit statuses and output are Run's:
// trace, which traces with the real tracer as usdt-toolexec does, and
// trace-options, which prints what Run hands the tracer instead of
// tracing, so that scripts can see how each flag lands.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"trace": func() {
			os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr, func(opt trace.Options, _ Exports) error { return trace.Run(opt) }))
		},
		"trace-options": func() { os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr, printOptions)) },
	})
}

// printOptions prints the options and exports, a field a line.
func printOptions(opt trace.Options, x Exports) error {
	w := opt.Stdout
	fmt.Fprintf(w, "binary %s\npid %d\npatterns %q\ncommand %q\n", opt.Binary, opt.PID, opt.Patterns, opt.Command)
	fmt.Fprintf(w, "json %v\nlatency %v\nstats %v\ninterval %v\nverbose %v\nattach %s\n", opt.JSON, opt.Latency, opt.Stats, opt.Interval, opt.Verbose, opt.Attach)
	fmt.Fprintf(w, "buffer %d\n", opt.Buffer)
	fmt.Fprintf(w, "otlp %s\nservice %s\nmin-span %v\npprof %s\nmetrics %s\nexports %v\n", x.OTLP, x.Service, x.MinSpan, x.Pprof, x.Metrics, x.Any())
	if opt.Stderr == nil || opt.Events != nil {
		return errors.New("the tracer got no stderr, or Events to send to")
	}
	return nil
}

func TestScript(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			// A process that runs as long as the scripts do, and its
			// executable, a Go binary without probes: this test's.
			env.Setenv("LIVE_PID", strconv.Itoa(os.Getpid()))
			env.Setenv("LIVE_EXE", exe)
			return nil
		},
		Cmds: clitest.Commands,
	})
}

// TestStatus: a traced command's exit status is trace's, as a shell
// gives it for one a signal killed, and any other error is printed and
// exits 1.
func TestStatus(t *testing.T) {
	exit := func(script string) error {
		err := exec.Command("sh", "-c", script).Run()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			t.Fatalf("sh -c %q: %v", script, err)
		}
		return err
	}
	exit3 := exit("exit 3")
	tests := []struct {
		name   string
		err    error
		status int
		stderr string
	}{
		{"success", nil, 0, ""},
		{"command's exit", exit3, 3, ""},
		{"command's exit, wrapped", fmt.Errorf("tracing: %w", exit3), 3, ""},
		{"command killed by SIGTERM", exit("kill -TERM $$"), 143, ""},
		{"command killed by SIGKILL", exit("kill -KILL $$"), 137, ""},
		{"tracer's error", errors.New("no BPF"), 1, "prefix: no BPF\n"},
		{"tracer's and exporter's errors", errors.Join(errors.New("no BPF"), io.ErrShortWrite), 1, "prefix: no BPF\nshort write\n"},
		// A binary's section name, quoted in an error, with a hint.
		{"escape sequences", errors.New("table in \x1b]0;x\a\x1b[2J\xff: damaged\n\thint: rebuild"), 1, "prefix: table in \\x1b]0;x\\a\\x1b[2J\\xff: damaged\n\thint: rebuild\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			if got := Status(tt.err, &stderr, "prefix:"); got != tt.status || stderr.String() != tt.stderr {
				t.Errorf("Status(%v) = %d, printing %q; want %d, printing %q", tt.err, got, stderr.String(), tt.status, tt.stderr)
			}
		})
	}
}
