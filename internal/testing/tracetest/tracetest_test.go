package tracetest

import (
	"slices"
	"strings"
	"testing"
	"time"
)

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
