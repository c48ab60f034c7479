package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/inlining"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// TestCorpus runs each program of testdata/corpus five ways: built plain,
// built with every function of its module instrumented (exit probes as
// deferred calls, and with unwind: false at the returns and inline:
// probe) and run untraced,
// and each instrumented build run while bpftrace is attached to every
// probe it has. The five runs must print the same bytes on stdout and on
// stderr and exit with the same status: instrumentation never changes
// what a program means, and with the default rules the compiler inlines
// every function and call it inlines in the plain build. Crash tracebacks, which print code offsets, are
// turned off (GOTRACEBACK=none); the panic message and the status remain.
func TestCorpus(t *testing.T) {
	root := filepath.Join(repoRoot, "testdata", "corpus")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Run(e.Name(), func(t *testing.T) { testCorpusProgram(t, filepath.Join(root, e.Name())) })
		}
	}
}

// runResult is everything a run of a program shows its user.
type runResult struct {
	stdout, stderr string
	status         int
}

func testCorpusProgram(t *testing.T, src string) {
	name := filepath.Base(src)
	dir := t.TempDir()
	files, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	cgo := "CGO_ENABLED=0"
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(src, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("\nimport \"C\"\n")) {
			cgo = "CGO_ENABLED=1"
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mod := "example.com/corpus/" + name
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+mod+"\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	// What the compiler inlines, which inline: keep keeps.
	gcflags := "-gcflags=" + mod + "/...=-m=2"
	plainInlining := readInlining(t, goCmd(t, dir, []string{cgo}, "build", gcflags, "-o", plain, "."))
	want := runCorpus(t, plain)
	t.Logf("plain run: exit status %d, %d bytes of stdout, %d of stderr", want.status, len(want.stdout), len(want.stderr))

	// Exit probes as deferred calls, the functions the compiler inlines
	// left as written (inline: keep); and at the returns, those probed
	// too (the default).
	for _, unwind := range []bool{true, false} {
		t.Run(fmt.Sprintf("unwind=%v", unwind), func(t *testing.T) {
			rules := filepath.Join(dir, fmt.Sprintf("rules-%v.yml", unwind))
			// One rules text for every program, which the wrapper's identity
			// covers: the standard library compiles once for each.
			text := fmt.Sprintf("provider: corpus\nrules:\n  - package: \"example.com/corpus/...\"\n    unwind: %v\n", unwind)
			if unwind {
				text += "    inline: keep\n"
			}
			if err := os.WriteFile(rules, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			inst := filepath.Join(dir, fmt.Sprintf("inst-%v", unwind))
			out := goCmd(t, dir, []string{cgo}, "build", gcflags, "-o", inst, "-toolexec="+wrapperBin()+" -rules "+rules, ".")
			if unwind {
				for _, l := range inlining.Lost(plainInlining, readInlining(t, out)) {
					t.Errorf("the instrumented build no longer inlines: %s", l)
				}
			}
			probes := len(readelfNotes(t, inst))
			if probes == 0 {
				t.Fatalf("%s: the instrumented build has no probes", name)
			}
			compareRuns(t, "instrumented, untraced", want, runCorpus(t, inst))

			t.Run("traced", func(t *testing.T) {
				tracetest.RequireAttach(t)
				got, hits, attached := runTraced(t, inst)
				if attached != probes+2 { // and BEGIN and END
					t.Errorf("bpftrace attached %d probes, want the binary's %d and BEGIN and END", attached, probes)
				}
				if hits == 0 {
					t.Errorf("no probe fired while bpftrace was attached to the %d probes", probes)
				}
				t.Logf("%d probes attached, %d hits", probes, hits)
				compareRuns(t, "instrumented, traced", want, got)
			})
		})
	}
}

func compareRuns(t *testing.T, what string, want, got runResult) {
	t.Helper()
	if got.status != want.status {
		t.Errorf("%s: exit status %d, plain build %d", what, got.status, want.status)
	}
	if got.stdout != want.stdout {
		t.Errorf("%s: stdout differs from the plain build's\n--- plain\n%s\n--- %s\n%s", what, want.stdout, what, got.stdout)
	}
	if got.stderr != want.stderr {
		t.Errorf("%s: stderr differs from the plain build's\n--- plain\n%s\n--- %s\n%s", what, want.stderr, what, got.stderr)
	}
}

func runCorpus(t *testing.T, bin string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), "GOTRACEBACK=none")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("running %s: %v\n%s%s", bin, err, stdout.Bytes(), stderr.Bytes())
	}
	return runResult{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

var (
	btAttaching = regexp.MustCompile(`(?m)^Attaching (\d+) probes`)
	btHits      = regexp.MustCompile(`(?m)^hits (\d+)$`)
)

// runTraced runs bin while bpftrace is attached to every probe of it. It
// attaches to the executable, not with -c: bpftrace -c gives the program
// its own stdout and writes there too, and returns its own exit status;
// the kernel sets the semaphores of a process started after the attach
// (uprobe reference counters) all the same.
func runTraced(t *testing.T, bin string) (got runResult, hits, attached int) {
	t.Helper()
	script := fmt.Sprintf(`usdt:%s:* { @hits++; } BEGIN { printf("ready\n"); } END { printf("hits %%d\n", @hits); clear(@hits); }`, bin)
	bt := exec.Command("bpftrace", "-e", script)
	bt.Env = append(os.Environ(), "BPFTRACE_MAX_PROBES=100000", "BPFTRACE_MAX_BPF_PROGS=100000")
	stdout, err := bt.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	bt.Stderr = &stderr
	start := time.Now()
	if err := bt.Start(); err != nil {
		t.Fatal(err)
	}
	defer bt.Process.Kill()
	var out strings.Builder
	ready := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if sc.Text() == "ready" {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			bt.Wait()
			t.Fatalf("bpftrace exited before attaching: %s\n%s", out.String(), stderr.String())
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("bpftrace did not attach within 120s: %s\n%s", out.String(), stderr.String())
	}
	t.Logf("bpftrace attached in %v", time.Since(start).Round(time.Millisecond))
	got = runCorpus(t, bin)
	// bpftrace 0.17 can miss an interrupt that arrives while its event
	// loop is between polls (seen once in 14 minutes of waiting): it is
	// sent again until bpftrace ends.
	for stopping := true; stopping; {
		if err := bt.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			stopping = false
		case <-time.After(5 * time.Second):
		}
	}
	if err := bt.Wait(); err != nil {
		t.Fatalf("bpftrace: %v\n%s\n%s", err, out.String(), stderr.String())
	}
	m, h := btAttaching.FindStringSubmatch(out.String()), btHits.FindStringSubmatch(out.String())
	if m == nil || h == nil {
		t.Fatalf("bpftrace printed no probe count or hit count:\n%s\n%s", out.String(), stderr.String())
	}
	attached, _ = strconv.Atoi(m[1])
	hits, _ = strconv.Atoi(h[1])
	return got, hits, attached
}
