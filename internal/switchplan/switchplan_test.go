package switchplan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/textpatch"
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
		got, ok := TracedCopy(tc.name)
		if got != tc.copy || ok != (tc.copy != "") {
			t.Errorf("TracedCopy(%q) = %q, %v, want %q", tc.name, got, ok, tc.copy)
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
		// A package's last path element names it, as trace's patterns do.
		{[]string{"main.*"}, "example.com/main.F", true},
		{[]string{"*"}, "archive/zip.(*File).Open", true},
		{[]string{"archive/zip.*"}, "archive/zip.(*File).Open", true},
		{[]string{"zip.File.Open"}, "archive/zip.(*File).Open", true},
		{[]string{"archive/*"}, "archive/zip.(*File).Open", true},
		{[]string{"tar.*"}, "archive/zip.(*File).Open", false},
		{[]string{"zip.Reader.*"}, "archive/zip.(*File).Open", false},
	} {
		if got := Matches(tc.patterns, tc.name); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v", tc.patterns, tc.name, got)
		}
	}
}

// TestUnswitched: a few functions that cannot be switched are named one
// a line, with what follows; many are counted by reason, unless each is
// asked for.
func TestUnswitched(t *testing.T) {
	pairs := func(n int) []Pair {
		ps := []Pair{{Func: "main.ok", Patch: &textpatch.Patch{}}}
		for i := range n {
			why := "frameless"
			if i%2 == 1 {
				why = "NOSPLIT"
			}
			ps = append(ps, Pair{Func: fmt.Sprintf("main.f%d", i), Why: why})
		}
		return ps
	}
	for _, tc := range []struct {
		name string
		n    int
		each bool
		want []string
	}{
		{"few", 2, false, []string{"main.f0 stays as compiled: frameless: untraced", "main.f1 stays as compiled: NOSPLIT: untraced"}},
		{"many", 7, false, []string{
			"4 functions stay as compiled (main.f0, main.f2, main.f4, ...): frameless: untraced",
			"3 functions stay as compiled (main.f1, main.f3, main.f5): NOSPLIT: untraced",
			"-v names each function that stays as compiled, and usdt-toolexec list -switch BINARY lists them all",
		}},
		{"many, each", 7, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			Unswitched(pairs(tc.n), tc.each, "untraced", func(l string) { got = append(got, l) })
			if tc.want == nil {
				if len(got) != tc.n {
					t.Errorf("said %d lines, want one a function (%d):\n%s", len(got), tc.n, strings.Join(got, "\n"))
				}
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("said\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
