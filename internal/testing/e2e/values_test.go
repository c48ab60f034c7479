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
	plain, inst := escapeReports(t, "values")
	if !strings.Contains(inst, "inlining call to usdtAutoWord") {
		t.Fatalf("the instrumented build passes no value by its address:\n%s", inst)
	}
	// Echo's entry probe and Keep's deferred exit probe box their T.
	for _, boxed := range []string{"(interface {})(v) does not escape", "(interface {})(*x.a1) does not escape"} {
		if !strings.Contains(inst, boxed) {
			t.Fatalf("the instrumented build reports no %q:\n%s", boxed, inst)
		}
	}
	sameEscapes(t, plain, inst)
}

// TestAttributesNoEscape: the rules' attributes of testdata/joined, which
// the traced branch evaluates in function literals over copies of the
// parameters, move nothing to the heap that the plain build keeps on the
// stack, as TestValuesNoEscape checks.
func TestAttributesNoEscape(t *testing.T) {
	plain, inst := escapeReports(t, "joined")
	if !strings.Contains(inst, "func literal does not escape") {
		t.Fatalf("the instrumented build evaluates no attribute in a function literal:\n%s", inst)
	}
	sameEscapes(t, plain, inst)
}

// escapeReports builds the fixture name plain and with its rules, and
// returns what the compiler's escape analysis (-gcflags=-m) said of each.
func escapeReports(t *testing.T, name string) (plain, inst string) {
	t.Helper()
	dir := fixture(t, name)
	bin := filepath.Join(t.TempDir(), name)
	plain = goCmd(t, dir, routeA.env(), "build", "-o", bin, "-gcflags=-m", ".")
	inst = goCmd(t, dir, routeA.env(), "build", "-o", bin, "-gcflags=-m", usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	return plain, inst
}

// sameEscapes checks that the compiler's escape analysis of main.go
// moved the same variables, and the same values, to the heap in the
// plain build (its -gcflags=-m output plain) as in the instrumented one.
func sameEscapes(t *testing.T, plain, inst string) {
	t.Helper()
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
