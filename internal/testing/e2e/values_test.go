package e2e

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestValuesNoEscape: a struct, an array, a slice, an interface or a
// time passed to a probe as its address, and a value of a type parameter
// boxed into an interface for its probe, move nothing to the heap: not
// even Later's slice, which a closure it hands on captures, by value only
// while nothing takes its address. The compiler's escape analysis
// (-gcflags=-m) reports the same variables moved to the heap, the same
// values escaping to it, and the same parameters leaking or not (a
// caller's values stay on its stack), on the same lines of main.go,
// instrumented or not; the line directives keep the lines the same (the
// columns move where probe code joins a line, and the results get
// names).
func TestValuesNoEscape(t *testing.T) {
	dir := fixture(t, "values")
	bin := filepath.Join(t.TempDir(), "values")
	plain := goCmd(t, dir, routeA.env(), "build", "-o", bin, "-gcflags=-m", ".")
	inst := goCmd(t, dir, routeA.env(), "build", "-o", bin, "-gcflags=-m", usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	if !strings.Contains(inst, "inlining call to usdtAutoWord") {
		t.Fatalf("the instrumented build passes no value by its address:\n%s", inst)
	}
	// Echo's entry probe and Keep's deferred exit probe box their T.
	for _, boxed := range []string{"(interface {})(v) does not escape", "(interface {})(*x.a1) does not escape"} {
		if !strings.Contains(inst, boxed) {
			t.Fatalf("the instrumented build reports no %q:\n%s", boxed, inst)
		}
	}
	want, got := movedToHeap(plain), movedToHeap(inst)
	for _, out := range []string{plain, inst} {
		if !strings.Contains(out, "./main.go:") {
			t.Fatalf("the compiler reported no escape analysis of main.go:\n%s", out)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("instrumented, moved to the heap:\n%q\nplain:\n%q", got, want)
	}
}

var (
	movedLine = regexp.MustCompile(`(?m)^\./main\.go:(\d+):\d+: (moved to heap: .*|.* escapes to heap|leaking param.*|[A-Za-z_]\w* does not escape)$`)
	// resultName is an unnamed result as the compiler names it, and as
	// instrumenting names it.
	resultName = regexp.MustCompile(`~r\d+|usdtAutoR\d+`)
)

func movedToHeap(out string) []string {
	var moved []string
	for _, m := range movedLine.FindAllStringSubmatch(out, -1) {
		moved = append(moved, m[1]+": "+resultName.ReplaceAllString(m[2], "RESULT"))
	}
	slices.Sort(moved)
	return slices.Compact(moved)
}
