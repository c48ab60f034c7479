package switchplan

import "testing"

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
		{[]string{"main.*"}, "example.com/main.F", false},
	} {
		if got := Matches(tc.patterns, tc.name); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v", tc.patterns, tc.name, got)
		}
	}
}
