package bench

import (
	"fmt"
	"github.com/go-usdt/usdt/internal/testing/benchpair"
	"github.com/go-usdt/usdt/internal/testing/wrapperid"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	usdtrt "github.com/go-usdt/usdt/runtime"
)

// Every benchmark measures one loop iteration around work, which the
// compiler may not inline or drop, so the loop keeps a realistic call in it
// and the difference between two benchmarks is what the probe adds.
//
// The loops are classic b.N loops, with the result sunk by hand, so that the
// code measured is what ordinary callers get: in the body of a b.Loop loop
// the compiler keeps the arguments and results of calls alive, which adds
// its own code around the probe under test.

//go:noinline
func work(i int) int { return i*7 + 3 }

// sink keeps the loops' results alive.
var sink int

const benchString = "some string"

func BenchmarkPlain(b *testing.B) {
	requireDisabled(b)
	s := 0
	for i := 0; i < b.N; i++ {
		s += work(i)
	}
	sink = s
}

func BenchmarkDisabledProbe(b *testing.B) {
	requireDisabled(b)
	s := 0
	for i := 0; i < b.N; i++ {
		s += work(i)
		BenchHit(int64(i))
	}
	sink = s
}

func BenchmarkDisabledProbeString(b *testing.B) {
	requireDisabled(b)
	s := 0
	for i := 0; i < b.N; i++ {
		s += work(i)
		BenchStr(benchString, int64(i))
	}
	sink = s
}

// BenchmarkEnabledHit fires bench:hit with its semaphore forced on and no
// tracer attached: the out-of-line fire function and the stub's NOP (a Go
// ABI0 call in the Plan9 route, a cgo call in the cgo route).
func BenchmarkEnabledHit(b *testing.B) {
	defer enable(b, "hit")()
	b.ReportAllocs()
	s := 0
	for i := 0; i < b.N; i++ {
		s += work(i)
		BenchHit(int64(i))
	}
	sink = s
}

// BenchmarkEnabledString is BenchmarkEnabledHit plus the NUL-terminated
// copy of a string argument into the fire function's frame.
func BenchmarkEnabledString(b *testing.B) {
	defer enable(b, "str")()
	b.ReportAllocs()
	s := 0
	for i := 0; i < b.N; i++ {
		s += work(i)
		BenchStr(benchString, int64(i))
	}
	sink = s
}

// The paired benchmarks measure what a disabled probe adds in a way that
// survives a noisy machine: they time short blocks of a plain loop and of the
// same loop with a probe, alternately, and report the medians over all
// blocks, per call: plain-ns/call, probe-ns/call and their difference,
// added-ns/call. A preemption or a noisy neighbour spoils a few blocks of
// both kinds alike rather than one whole benchmark. Their ns/op counts one
// iteration of both loops.

func BenchmarkPairedDisabledProbe(b *testing.B) { benchPaired(b, loopHit) }

func BenchmarkPairedDisabledProbeString(b *testing.B) { benchPaired(b, loopStr) }

func benchPaired(b *testing.B, probed func(n int) int) {
	requireDisabled(b)
	sink = benchpair.Run(b, loopPlain, probed, "plain-ns/call", "probe-ns/call")
}

//go:noinline
func loopPlain(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += work(i)
	}
	return s
}

//go:noinline
func loopHit(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += work(i)
		BenchHit(int64(i))
	}
	return s
}

//go:noinline
func loopStr(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += work(i)
		BenchStr(benchString, int64(i))
	}
	return s
}

// requireDisabled skips a disabled-path benchmark while a tracer is attached
// to one of the probes, since it would then measure the enabled path.
func requireDisabled(tb testing.TB) {
	tb.Helper()
	if BenchHitEnabled() || BenchStrEnabled() {
		tb.Skip("a tracer is attached to a bench probe")
	}
}

// enable sets the semaphore of probe bench:NAME to 1, as an attached tracer
// would, checks through the runtime's registry that it is the registered
// semaphore, and returns the function that sets it back to 0.
func enable(tb testing.TB, name string) (restore func()) {
	tb.Helper()
	hit, str := semaphores()
	if hit == nil {
		tb.Skipf("no USDT probes on %s", route)
	}
	sema := map[string]*uint16{"hit": hit, "str": str}[name]
	if *sema != 0 {
		tb.Skipf("a tracer is attached to bench:%s", name)
	}
	*sema = 1
	restore = func() { *sema = 0 }
	for _, p := range usdtrt.Probes() {
		if p.Provider == "bench" && p.Enabled != (p.Name == name) {
			restore()
			tb.Fatalf("after setting the semaphore of bench:%s, the registry reports bench:%s enabled=%v", name, p.Name, p.Enabled)
		}
	}
	if on := map[string]bool{"hit": BenchHitEnabled(), "str": BenchStrEnabled()}[name]; !on {
		restore()
		tb.Fatalf("after setting the semaphore of bench:%s, the generated Enabled function reports false", name)
	}
	return restore
}

// wantRouteEnv makes a child test process check that it was built for the
// route its parent asked for.
const wantRouteEnv = "USDT_BENCH_WANT_ROUTE"

// TestFireDoesNotAllocate fires the probes with their semaphores forced on:
// the string copy lives on the fire function's stack, so nothing allocates.
// It runs in the route this test binary was built for, then, unless -short,
// in a child `go test` for each of the two routes.
func TestFireDoesNotAllocate(t *testing.T) {
	t.Logf("route %s", route)
	if want := os.Getenv(wantRouteEnv); want != "" && want != route {
		t.Fatalf("built for route %s, want %s", route, want)
	}
	long := strings.Repeat("x", 3*usdtrt.CStringMax)
	for _, c := range []struct {
		probe, desc string
		fire        func()
	}{
		{"hit", "int", func() { BenchHit(42) }},
		{"str", "short string", func() { BenchStr(benchString, 42) }},
		{"str", "truncated string", func() { BenchStr(long, 42) }},
	} {
		restore := enable(t, c.probe)
		if n := testing.AllocsPerRun(1000, c.fire); n != 0 {
			t.Errorf("route %s: firing bench:%s with a %s: %v allocs per call, want 0", route, c.probe, c.desc, n)
		}
		restore()
	}

	if os.Getenv(wantRouteEnv) != "" {
		return
	}
	if testing.Short() {
		t.Log("-short: not running the child tests of both routes")
		return
	}
	for _, r := range buildRoutes(t) {
		t.Run(r.name, func(t *testing.T) {
			args := append([]string{"test", "-count=1", "-v", "-run=^TestFireDoesNotAllocate$"}, r.flags...)
			out := goCmd(t, append(r.env, wantRouteEnv+"="+r.name), append(args, ".")...)
			if !strings.Contains(out, "--- PASS: TestFireDoesNotAllocate") || strings.Contains(out, "--- SKIP") ||
				!strings.Contains(out, "route "+r.name) {
				t.Fatalf("child test did not pass without skipping:\n%s", out)
			}
		})
	}
}

// TestProbeInlinable checks, in both routes, that the compiler inlines the
// probe functions into their callers, so that a disabled probe is a load and
// a branch in the caller rather than a call. It compiles this package with
// its tests, so the call sites checked are the benchmarks' own.
func TestProbeInlinable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiles the package twice")
	}
	for _, r := range buildRoutes(t) {
		t.Run(r.name, func(t *testing.T) {
			args := append([]string{"test", "-c", "-o", filepath.Join(t.TempDir(), "bench.test"), "-gcflags=-m"}, r.flags...)
			out := goCmd(t, r.env, append(args, ".")...)
			wants := []string{`can inline BenchHit\b`, `can inline BenchStr\b`}
			for _, site := range benchCallSites(t) {
				wants = append(wants, fmt.Sprintf(`bench_test\.go:%d:\d+: inlining call to %s\b`, site.line, site.probe))
			}
			for _, want := range wants {
				if !regexp.MustCompile(want).MatchString(out) {
					t.Errorf("-gcflags=-m output has no match for %q", want)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// callSite is where a benchmark loop fires a probe.
type callSite struct {
	line  int
	probe string // the Go function called
}

// benchCallSites returns the lines of this file where the benchmark loops
// fire a probe.
func benchCallSites(t *testing.T) []callSite {
	t.Helper()
	src, err := os.ReadFile("bench_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var sites []callSite
	for i, l := range strings.Split(string(src), "\n") {
		switch strings.TrimSpace(l) {
		case "BenchHit(int64(i))":
			sites = append(sites, callSite{i + 1, "BenchHit"})
		case "BenchStr(benchString, int64(i))":
			sites = append(sites, callSite{i + 1, "BenchStr"})
		}
	}
	if len(sites) < 6 {
		t.Fatalf("found %d probe call sites in the benchmarks, want at least 6", len(sites))
	}
	return sites
}

type buildRoute struct {
	name  string   // as the route constant of the package built that way
	env   []string // added to the environment of the go command
	flags []string // added to the arguments of go test
}

// buildRoutes returns the two routes, building usdt-toolexec for the first.
func buildRoutes(t *testing.T) []buildRoute {
	t.Helper()
	if route == "none" {
		t.Skipf("no USDT probes on this platform")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command: %v", err)
	}
	// The wrapper's identity, in every cache key of the builds it wraps,
	// is that of its instrumenting code: a change to the tracer alone
	// leaves the builds of the routes through it, the standard library's
	// included, cached.
	id, err := wrapperid.LDFlag("../../..", nil)
	if err != nil {
		t.Fatal(err)
	}
	toolexec := filepath.Join(t.TempDir(), "usdt-toolexec")
	goCmd(t, nil, "build", id, "-o", toolexec, "../../../cmd/usdt-toolexec")
	routes := []buildRoute{{"plan9", []string{"CGO_ENABLED=0"}, []string{"-toolexec=" + toolexec}}}
	cc := strings.TrimSpace(goCmd(t, nil, "env", "CC"))
	if _, err := exec.LookPath(strings.Fields(cc + " gcc")[0]); err != nil {
		t.Logf("no C compiler (%s): skipping the cgo route", cc)
		return routes
	}
	return append(routes, buildRoute{"cgo", []string{"CGO_ENABLED=1"}, nil})
}

// goCmd runs the go command in this directory and returns its combined
// output, failing the test if it fails.
func goCmd(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s go %s: %v\n%s", strings.Join(env, " "), strings.Join(args, " "), err, out)
	}
	return string(out)
}
