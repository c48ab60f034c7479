package tracetest

import (
	"fmt"
	"os"
	"testing"
)

// CI reports whether the tests run in CI: $CI is set, to anything but 0
// or false, as .ci/run's caller sets CI=true. There, what the machine is
// expected to have (the tracers scripts/setup.sh installs, the caches
// make images builds, a bpftrace that attaches) is part of what a green
// run proves.
func CI() bool {
	switch os.Getenv("CI") {
	case "", "0", "false", "FALSE", "False":
		return false
	}
	return true
}

// SkipMissing skips t because part of the test machine is missing:
// Jaeger, the VM images or one of their kernels, the sid chroot, a tool
// scripts/setup.sh installs, or a bpftrace that attaches. The message
// says what is missing and how to build it. In CI it fails t instead: a
// green CI run must not hide a test that never ran. A skip for any other
// reason (an architecture, a kernel feature the machine lacks, -short)
// stays a t.Skip.
func SkipMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s\n(CI is set: in CI a missing part of the test machine fails the test instead of skipping it; docs/testing.md, \"The per-machine caches\")", msg)
	}
	t.Skip(msg)
}
