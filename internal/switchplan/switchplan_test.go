package switchplan

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/switchhold"
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

// TestBridge: a switch's hold covers the functions right after it that
// cannot be switched, rank after rank, and no other.
func TestBridge(t *testing.T) {
	// s: a switch; u: a function that cannot be; a gap in the ranks
	// is a function the patterns did not want.
	for _, tc := range []struct {
		name  string
		kinds string
		ranks []int
		want  []int // each switch's Unswitchable, in order
	}{
		{"none", "sss", []int{0, 1, 2}, []int{0, 0, 0}},
		{"between", "suus", []int{0, 1, 2, 3}, []int{2, 0}},
		{"at the end", "su", []int{4, 5}, []int{1}},
		{"first", "us", []int{0, 1}, []int{0}},
		{"a rank not wanted", "suu", []int{0, 1, 3}, []int{1}},
		{"after a gap", "su", []int{0, 2}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pairs []Pair
			for _, k := range tc.kinds {
				if k == 's' {
					pairs = append(pairs, Pair{Patch: &textpatch.Patch{}})
				} else {
					pairs = append(pairs, Pair{Why: "frameless"})
				}
			}
			bridge(pairs, tc.ranks)
			var got []int
			for _, p := range pairs {
				if p.Patch != nil {
					got = append(got, p.Patch.Unswitchable)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Unswitchable %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHoldBridges: Hold holds a switch's function and the unswitchable
// ones it bridges, as another tracer sees them, and not the next.
func TestHoldBridges(t *testing.T) {
	pid := os.Getpid()
	h, err := Hold(pid, []textpatch.Patch{{Index: 10, Unswitchable: 2}, {Index: 14}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	other, err := switchhold.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i, want := range map[int]bool{9: false, 10: true, 11: true, 12: true, 13: false, 14: true, 15: false} {
		if held, err := other.Others(i); err != nil || held != want {
			t.Errorf("function %d held: %v (%v), want %v", i, held, err, want)
		}
	}
}
