package tracetest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRequireAttach attaches the host's bpftrace: where it cannot, the
// test skips, and in CI fails, saying why.
func TestRequireAttach(t *testing.T) {
	RequireAttach(t)
	// A second call must answer from the cache, not attach again.
	start := time.Now()
	RequireAttach(t)
	if d := time.Since(start); d > time.Second {
		t.Errorf("second RequireAttach took %v: the answer is not cached", d)
	}
	if !tracefsMounted() {
		t.Error("RequireAttach passed but tracefs is not mounted")
	}
}

func TestFilterNoise(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"Attaching 1 probe...\n42\n", "Attaching 1 probe...\n42\n"},
		{"ERROR: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace. If ...\nAttaching 1 probe...\n", "Attaching 1 probe...\n"},
		{"WARNING: Could not read functions from /sys/kernel/tracing/available_filter_functions. If ...\nWARNING: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace. ...\nAttached 1 probe\n", "Attached 1 probe\n"},
		{"x.bt:5:28-39: WARNING: signed operands for '/' can lead to undefined behavior\n", "x.bt:5:28-39: WARNING: signed operands for '/' can lead to undefined behavior\n"},
	}
	for _, tc := range tests {
		if got := filterNoise(tc.in); got != tc.want {
			t.Errorf("filterNoise(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPerfEnv(t *testing.T) {
	t.Setenv("HOME", "/root")
	env := PerfEnv("/tmp/x")
	for _, want := range []string{"HOME=/tmp/x", "PERF_BUILDID_DIR=/tmp/x/.debug"} {
		if !slices.Contains(env, want) {
			t.Errorf("PerfEnv lacks %s", want)
		}
	}
	for _, kv := range env {
		if kv == "HOME=/root" {
			t.Error("PerfEnv kept the caller's HOME")
		}
	}
}

func TestOutput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"ok", []string{"sh", "-c", "echo hi"}, "hi\n", ""},
		{"fails", []string{"sh", "-c", "echo bad; exit 3"}, "bad\n", "exit status 3"},
		{"timeout", []string{"sh", "-c", "while :; do :; done"}, "", "timed out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Output(300*time.Millisecond, nil, tc.args[0], tc.args[1:]...)
			if out != tc.want {
				t.Errorf("output %q, want %q", out, tc.want)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRequireSkipsWithReason(t *testing.T) {
	// Outside CI: TestSkipMissing checks what CI changes.
	t.Setenv("CI", "")
	tests := []struct {
		tools    []string
		wantSkip bool
	}{
		{[]string{"sh"}, false},
		{[]string{"sh", "tracetest-no-such-tool"}, true},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.tools, "+"), func(t *testing.T) {
			var skipped bool
			// Run the check in its own subtest: a skip ends only that one.
			t.Run("inner", func(t *testing.T) {
				defer func() { skipped = t.Skipped() }()
				Require(t, tc.tools...)
			})
			if skipped != tc.wantSkip {
				t.Errorf("Require(%v) skipped = %v, want %v", tc.tools, skipped, tc.wantSkip)
			}
		})
	}
}

func TestCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "true": true, "1": true, "yes": true} {
		t.Setenv("CI", v)
		if got := CI(); got != want {
			t.Errorf("CI=%q: CI() = %v, want %v", v, got, want)
		}
	}
}

// skipMissingChild marks the run of this test binary in which
// TestSkipMissing's child calls SkipMissing.
const skipMissingChild = "TRACETEST_SKIP_MISSING_CHILD"

// TestSkipMissing runs SkipMissing in a child test process, with CI set
// and without: in CI the test fails, saying what is missing; elsewhere
// it skips, saying the same.
func TestSkipMissing(t *testing.T) {
	if os.Getenv(skipMissingChild) != "" {
		SkipMissing(t, "the frobnicator is missing (make frobnicator builds it)")
		return
	}
	for _, tc := range []struct{ ci, want string }{{"", "--- SKIP: TestSkipMissing"}, {"true", "--- FAIL: TestSkipMissing"}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipMissing$", "-test.v")
		cmd.Env = append(os.Environ(), skipMissingChild+"=1", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != (tc.ci != "") {
			t.Errorf("CI=%q: the child ended with %v, want failure %v:\n%s", tc.ci, err, tc.ci != "", out)
		}
		for _, want := range []string{tc.want, "the frobnicator is missing (make frobnicator builds it)"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("CI=%q: the child's output lacks %q:\n%s", tc.ci, want, out)
			}
		}
	}
}

// TestAttachCheckRetries checks that a failed attach is tried again, up
// to attachTries times, and a success kept.
func TestAttachCheckRetries(t *testing.T) {
	var c attachCheck
	tries := 0
	flaky := func() error {
		tries++
		if tries < attachTries {
			return fmt.Errorf("try %d timed out", tries)
		}
		return nil
	}
	for i := 1; i < attachTries; i++ {
		if err := c.run(flaky); err == nil {
			t.Fatalf("call %d passed, want its try's error", i)
		}
	}
	for i := 0; i < 2; i++ {
		if err := c.run(flaky); err != nil {
			t.Fatalf("call after %d tries: %v, want success", tries, err)
		}
	}
	if tries != attachTries {
		t.Errorf("tried %d times, want %d: a success is kept", tries, attachTries)
	}
	var broken attachCheck
	tries = 0
	fail := func() error { tries++; return fmt.Errorf("no uprobes here") }
	for range attachTries + 2 {
		if err := broken.run(fail); err == nil || !strings.Contains(err.Error(), "no uprobes here") {
			t.Fatalf("error %v, want the try's", err)
		}
	}
	if tries != attachTries {
		t.Errorf("tried %d times, want %d", tries, attachTries)
	}
}
