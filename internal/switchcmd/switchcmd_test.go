package switchcmd

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestUsage checks the command line's errors: each exits 2 with a hint.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no PATTERN"},
		{[]string{"main.*"}, "give -p PID or -- CMD"},
		{[]string{"-p", "1", "main.*", "--", "true"}, "give -p PID or -- CMD"},
		{[]string{"[", "--", "true"}, `bad pattern "["`},
		{[]string{"-x"}, "flag provided but not defined"},
	} {
		var stderr bytes.Buffer
		if code := Run(tc.args, &stderr, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("switch %q: exit %d, %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestNoCopies: a program built without sites: switch (this test) has
// nothing to switch, and switch says how to build one; one that is not
// Go's is refused.
func TestNoCopies(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for exe, want := range map[string]string{exe: "build it with a rule that says sites: switch", "/bin/sh": "not a Go executable"} {
		var stderr bytes.Buffer
		code := Run([]string{"main.*", "--", exe}, &stderr, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("switch -- %s: exit %d, %q, want 1 and %q", exe, code, stderr.String(), want)
		}
	}
}
