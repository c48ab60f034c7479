package switchcmd

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestTracedCopy(t *testing.T) {
	for _, tc := range []struct{ name, copy string }{
		{"main.fib", "main.usdtSwitched_fib"},
		{"main.Fib", "main.usdtSwitched_Fib"},
		{"main.(*Store).Put", "main.(*Store).usdtSwitched_Put"},
		{"main.Store.Get", "main.Store.usdtSwitched_Get"},
		{"example.com/a.b/pkg.F", "example.com/a.b/pkg.usdtSwitched_F"},
		{"example.com/a.b/pkg.(*T).M", "example.com/a.b/pkg.(*T).usdtSwitched_M"},
		// Closures, generic functions and copies have none.
		{"main.fib.func1", ""},
		{"main.main.gowrap1", ""},
		{"main.List[...].Len", ""},
		{"main.usdtSwitched_fib", ""},
		{"main.(*T).usdtSwitched_M", ""},
		{"main", ""},
	} {
		got, ok := tracedCopy(tc.name)
		if got != tc.copy || ok != (tc.copy != "") {
			t.Errorf("tracedCopy(%q) = %q, %v, want %q", tc.name, got, ok, tc.copy)
		}
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		name     string
		want     bool
	}{
		{[]string{"main.*"}, "main.fib", true},
		{[]string{"main.*"}, "main.(*Store).Put", true},
		{[]string{"main.Store.*"}, "main.(*Store).Put", true},
		{[]string{"main.(*Store).*"}, "main.(*Store).Put", true},
		{[]string{"main.Store.Get"}, "main.(*Store).Put", false},
		{[]string{"other.*", "main.fib"}, "main.fib", true},
		{[]string{"main.*"}, "example.com/main.F", false},
	} {
		if got := matches(tc.patterns, tc.name); got != tc.want {
			t.Errorf("matches(%q, %q) = %v", tc.patterns, tc.name, got)
		}
	}
}

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
