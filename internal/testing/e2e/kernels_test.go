package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
	"github.com/go-usdt/usdt/internal/testing/vm"
)

// TestKernels runs the attach tests (guestTests) on real kernels of other
// versions and architectures, booted under qemu by package vm from the
// images scripts/vm-images.sh caches: the host builds every binary they
// trace, and this package's test binary, for the kernel's architecture;
// inside, the test binary runs in guest mode (guestDir), tracing those
// binaries with the VM's own Debian 12 tracers. The same binaries run on
// the host too, for a row to compare with. It logs a table of kernel,
// architecture and consumer, and fails where a consumer failed, and
// where a guest test skipped that docs/compatibility.md's table of
// allowed skips does not list for that row. Without the VM images it
// skips, as a row does whose kernel vm.Expected names and the images
// lack; in CI both fail.

// guestDir is set when this test binary runs in guest mode: the directory
// of the binaries the host built for this machine, which the tests take
// instead of building (a guest has no Go toolchain).
var guestDir = os.Getenv(guestEnv)

const guestEnv = "USDT_E2E_GUEST"

// guestTests run on every machine of TestKernels: what a kernel changes
// (uprobes and their semaphores, BPF and its helpers, perf events,
// ptrace, process_vm_readv, a process's exit), through every consumer.
// archTests run besides them only where the machine's architecture is not
// the host's (arm64): what the architecture changes, which this package's
// own run checks on the host. In guest mode the tests take prebuilt
// binaries.
var (
	guestTests = []string{
		"TestArguments", "TestArgumentsAttachPID", "TestSemaphoreGating",
		"TestBCCAndPerf", "TestAuto", "TestLibbpf",
		"TestTraceTypes", "TestTracePIDExit", "TestTracePIENeedsCookies",
		"TestTraceValuesCorpus", "TestTraceStats",
		"TestTraceTypesRing", "TestRingStatsUnprivileged",
		"TestRingBufferFull", "TestRingKilledTracer", "TestRingWithBpftrace",
		"TestTraceUnmapped",
	}
	archTests = []string{
		"TestGDB", "TestTraceSpanTimes", "TestNotes",
		"TestRingProviderUnprivileged", "TestRingProfileUnwinds",
		"TestSwitchCommand", "TestTraceSwitches", "TestSwitchStress",
		"TestRingBlock",
	}
	// smokeTests run, instead of guestTests, on a row whose kernel
	// version another row runs whole, on the other architecture, and
	// whose architecture's kernel code rows of older and newer versions
	// run whole (6.1-amd64: 6.1-arm64, 5.10-amd64 and the host): one test
	// for each of the kernel's parts, that its build of them works.
	smokeTests = []string{
		"TestArguments", "TestSemaphoreGating", "TestBCCAndPerf",
		"TestLibbpf", "TestTraceStats", "TestTracePIENeedsCookies",
		"TestRingStatsUnprivileged",
	}
	// smokeRows are the rows that run smokeTests.
	smokeRows = []string{"6.1-amd64"}
)

// guestScope is what a guest-mode run checks besides what a kernel
// changes: guestScopeKernel, nothing, on a machine of the host's
// architecture (the host row included), where this package's own run on
// the host has checked the architecture's code already; guestScopeArch
// elsewhere, where nothing else runs it; guestScopeSmoke, on smokeRows,
// smokeTests alone. Every guest takes one build
// route (guestRoutes) and one output format: how trace formats what it
// read is the same Go code everywhere.
var guestScope = os.Getenv(guestScopeEnv)

const (
	guestScopeEnv    = "USDT_E2E_GUEST_SCOPE"
	guestScopeKernel = "kernel"
	guestScopeArch   = "arch"
	guestScopeSmoke  = "smoke"
)

// kernelOnly reports whether this run checks only what the kernel
// changes (guestScope): a test then leaves out its variants that only
// the architecture changes.
func kernelOnly() bool { return guestDir != "" && guestScope != guestScopeArch }

// guestRoutes returns the build routes a test takes: all of rs on the
// host, the first in a guest. How a binary was built changes nothing a
// kernel does with it; the host's run checks every route, and cross-built
// binaries' notes and argument specs (TestCrossArm64).
func guestRoutes(rs ...route) []route {
	if guestDir != "" {
		return rs[:1]
	}
	return rs
}

// prebuilt returns the binary the host built for the guest as
// guestDir/fixture/variant, and skips the test, saying why, if there is
// none.
func prebuilt(t *testing.T, fixture, variant string) string {
	t.Helper()
	path := filepath.Join(guestDir, fixture, variant)
	if _, err := os.Stat(path); err != nil {
		why, _ := os.ReadFile(path + missingSuffix)
		if len(why) == 0 {
			why = []byte("TestKernels does not build it")
		}
		t.Skipf("%s/%s is not built for this machine: %s", fixture, variant, strings.TrimSpace(string(why)))
	}
	return path
}

// missingSuffix marks a file saying why a prebuilt binary is missing.
const missingSuffix = ".missing"

// target is a machine the tests build binaries for: the host (the zero
// value), or a VM's architecture with its root as the C sysroot.
type target struct {
	goarch string
	root   string
}

func (tg target) env() []string {
	if tg.goarch == "" {
		return nil
	}
	env := []string{"GOARCH=" + tg.goarch}
	if tg.goarch != runtime.GOARCH {
		env = append(env, "CC=clang "+strings.Join(tg.cflags(), " "))
	}
	return env
}

// cflags are clang's flags to compile and link for the target.
func (tg target) cflags() []string {
	if tg.goarch == "" || tg.goarch == runtime.GOARCH {
		return nil
	}
	// cgo compiles with -Werror, and -fuse-ld means nothing to a compile.
	return []string{"--target=" + tg.triple(), "--sysroot=" + tg.root, "-fuse-ld=lld", "-Wno-unused-command-line-argument"}
}

// triple is the target's Debian multiarch name.
func (tg target) triple() string {
	if tg.arch() == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// bpfArch is the target as libbpf's bpf_tracing.h names it.
func (tg target) bpfArch() string {
	if tg.arch() == "arm64" {
		return "arm64"
	}
	return "x86"
}

func (tg target) arch() string {
	if tg.goarch == "" {
		return runtime.GOARCH
	}
	return tg.goarch
}

func TestKernels(t *testing.T) {
	if guestDir != "" {
		t.Skip("TestKernels boots the machines that run the others")
	}
	kernels, err := vm.Kernels()
	var missing *vm.MissingError
	if err != nil && !errors.As(err, &missing) {
		tracetest.SkipMissing(t, "%v", err)
	}
	allowed, err := allowedSkips(compatibilityDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows []matrixRow
	defer func() { t.Logf("kernels, architectures and consumers:\n%s", formatMatrix(rows)) }()
	builds := map[string]string{}
	// Built once per architecture, kept until every machine ran.
	keep := t.TempDir()
	guest := func(t *testing.T, arch string) string {
		t.Helper()
		if dir, ok := builds[arch]; ok {
			return dir
		}
		root := vm.Root(arch)
		if _, err := os.Stat(filepath.Join(root, "usr", "bin", "bpftrace")); err != nil {
			tracetest.SkipMissing(t, "no %s root with bpftrace in %s: run scripts/vm-images.sh (make vm-images)", arch, root)
		}
		dir := filepath.Join(keep, arch)
		start := time.Now()
		buildGuest(t, dir, target{goarch: arch, root: root})
		t.Logf("built the %s binaries in %v", arch, time.Since(start).Round(time.Second))
		builds[arch] = dir
		return dir
	}
	if runtime.GOARCH == "amd64" {
		t.Run("host", func(t *testing.T) {
			dir := guest(t, runtime.GOARCH)
			start := time.Now()
			out, _ := hostRun(dir)
			results := checkGuest(t, out)
			checkSkips(t, "host", results, allowed)
			rows = append(rows, matrixRow{kernel: "host " + kernelRelease(), arch: runtime.GOARCH, accel: "none", took: time.Since(start), results: results})
		})
	}
	if missing != nil {
		// A kernel of the matrix that failed to build is a row that
		// skips, or in CI fails, not one that drops out.
		for _, name := range missing.Missing {
			t.Run(name, func(t *testing.T) { tracetest.SkipMissing(t, "%v", missing) })
		}
	}
	for _, k := range kernels {
		t.Run(k.Name(), func(t *testing.T) {
			tracetest.Require(t, map[string]string{"amd64": "qemu-system-x86_64", "arm64": "qemu-system-aarch64"}[k.Arch])
			dir := guest(t, k.Arch)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			var console bytes.Buffer
			slack := 1
			if vm.Accel(k.Arch) == "tcg" {
				slack = 30
			}
			scope := scopeOf(k.Name(), k.Arch)
			res, err := vm.Run(ctx, vm.Machine{Kernel: k, Root: vm.Root(k.Arch)}, vm.Job{
				WorkDir: dir,
				Command: guestCommand(dir, scope),
				Env:     append(guestEnviron(dir, scope), fmt.Sprintf("%s=%d", tracetest.TimeSlackEnv, slack)),
				Console: &console,
			})
			row := matrixRow{kernel: k.Release, arch: k.Arch, accel: res.Accel, took: res.Boot}
			defer func() { rows = append(rows, row) }()
			if err != nil {
				t.Fatalf("%v\nthe console:\n%s", err, console.Bytes()[max(0, console.Len()-20000):])
			}
			row.results = checkGuest(t, res.Output)
			checkSkips(t, k.Name(), row.results, allowed)
			if res.ExitCode != 0 && !slices.ContainsFunc(row.results, func(r testResult) bool { return r.status == "FAIL" }) {
				t.Errorf("the guest's tests exited %d without a failing test:\n%s", res.ExitCode, res.Output)
			}
		})
	}
}

// guestCommand runs this package's tests in guest mode.
func guestCommand(dir, scope string) []string {
	tests := guestTests
	switch scope {
	case guestScopeArch:
		tests = append(slices.Clip(tests), archTests...)
	case guestScopeSmoke:
		tests = smokeTests
	}
	return []string{filepath.Join(dir, "e2e.test"), "-test.v=test2json", "-test.count=1", "-test.timeout=25m",
		"-test.run=^(" + strings.Join(tests, "|") + ")$"}
}

// scopeOf is the guestScope of the row named row, a machine of arch.
func scopeOf(row, arch string) string {
	if slices.Contains(smokeRows, row) {
		return guestScopeSmoke
	}
	if arch == runtime.GOARCH {
		return guestScopeKernel
	}
	return guestScopeArch
}

func guestEnviron(dir, scope string) []string {
	return []string{
		guestScopeEnv + "=" + scope,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8",
		guestEnv + "=" + dir,
		tracetest.AttachTargetEnv + "=" + filepath.Join(dir, "attachcheck"),
	}
}

// hostRun runs the guest's tests on the host, from the same binaries.
func hostRun(dir string) (string, error) {
	scope := scopeOf("host", runtime.GOARCH)
	cmd := exec.Command(filepath.Join(dir, "e2e.test"), guestCommand(dir, scope)[1:]...)
	cmd.Dir = dir
	cmd.Env = append(guestEnviron(dir, scope), "PATH="+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// buildGuest builds into dir what the guest tests take, for tg: the
// tools, the fixtures on the routes the tests use, the libbpf consumer,
// the uprobe target of tracetest, and this package's test binary.
func buildGuest(t *testing.T, dir string, tg target) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(buildTools(filepath.Join(dir, "tools"), tg.goarch, false))
	_, err := tracetest.BuildAttachTarget(dir, tg.goarch)
	must(err)
	test := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, "e2e.test"), ".")
	test.Env = append(os.Environ(), append(tg.env(), "CGO_ENABLED=0")...)
	if out, err := test.CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	// put builds one binary as dir/fixture/variant, or writes why it
	// could not be built beside where it would be.
	put := func(fixture, variant string, build func(t *testing.T) string) {
		must(os.MkdirAll(filepath.Join(dir, fixture), 0o755))
		dst := filepath.Join(dir, fixture, variant)
		// The binary is copied before the subtest's directories go.
		if !t.Run("build "+fixture+" "+variant, func(t *testing.T) { copyFile(t, build(t), dst) }) {
			must(os.WriteFile(dst+missingSuffix, []byte("the host failed to build it for "+tg.arch()+" (see TestKernels' log)"), 0o644))
		}
	}
	types := fixture(t, "types")
	for _, r := range []route{routeA, {name: "a-pie", toolexec: true, flags: []string{"-buildmode=pie"}}, {name: "go", toolexec: true}} {
		r.target = tg
		put("types", r.name, func(t *testing.T) string { return build(t, types, r) })
	}
	a := &auto{dir: userModule(t, "auto", "example.com/auto"), out: t.TempDir(), memo: map[string]memoized{}, buildOutput: map[string]string{}, target: tg}
	a.rules = filepath.Join(a.dir, "rules.yml")
	for _, variant := range []string{"inst", "inst-pie"} {
		put("auto", variant, func(t *testing.T) string { return a.bin(t, variant) })
	}
	ra := routeA
	ra.target = tg
	put("jobs", ra.name, buildJobs(ra))
	put("ring", "rules", func(t *testing.T) string { return buildFixtureRulesFor(t, tg, "ring") })
	put("unmapped", "rules", func(t *testing.T) string { return buildFixtureRulesFor(t, tg, "unmapped") })
	if ring := filepath.Join(dir, "ring", "rules"); exists(ring) {
		// The guests have no readelf.
		writeSemaphores(t, ring)
	}
	put("main", "pidexit", func(t *testing.T) string { return buildMainFor(t, tg, "pidexit", pidExitProgram) })
	put("main", "stats", func(t *testing.T) string { return buildMainRules(t, tg, "stats", statsSrc, statsRules) })
	put("main", "nest", func(t *testing.T) string { return buildMainRules(t, tg, "nest", nestSrc, nestRules) })
	put("main", "notes", func(t *testing.T) string { return buildMainRules(t, tg, "notes", notesSrc, notesRules) })
	put("main", "profile", func(t *testing.T) string { return buildMainRules(t, tg, "profile", profileSrc, profileRules) })
	put("main", "switch", func(t *testing.T) string { return buildMainRules(t, tg, "switch", switchSrc, switchRules) })
	put("main", "stress", func(t *testing.T) string {
		return buildMainRules(t, tg, "stress", switchStressSrc, switchStressRules)
	})
	values := fixture(t, "values")
	for _, variant := range valuesVariants {
		if variant.name == "plain" { // the guests' (TestTraceValuesCorpus)
			put("values", variant.name, func(t *testing.T) string { return buildValues(t, values, tg, variant) })
		}
	}
	lib := filepath.Join(dir, "libbpf")
	t.Run("build libbpf", func(t *testing.T) { buildLibbpfConsumer(t, tracetest.Host, lib, tg) })
	must(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = os.Chmod(path, 0o755)
		}
		return err
	}))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// testResult is how one test of the guest ended.
type testResult struct {
	name, status, reason string
}

// checkGuest reads the guest's go test output (-test.v=test2json) with go
// tool test2json into the results of its leaf tests, each skip with what
// the test logged, and fails t for each test that failed there.
func checkGuest(t *testing.T, out string) []testResult {
	t.Helper()
	conv := exec.Command("go", "tool", "test2json", "-t")
	conv.Stdin = strings.NewReader(out)
	js, err := conv.Output()
	if err != nil {
		t.Fatalf("go tool test2json: %v", err)
	}
	type event struct {
		Action, Test, Output string
		Elapsed              float64
	}
	logs := map[string]string{}
	var all []testResult
	// The time of each top-level test, longest first, says where a
	// machine's minutes go (test2json gives them with -t).
	var took []event
	dec := json.NewDecoder(bytes.NewReader(js))
	for dec.More() {
		var e event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("go tool test2json: %v", err)
		}
		switch {
		case e.Test == "":
		case e.Action == "output":
			if l := strings.TrimSpace(e.Output); !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
				logs[e.Test] += l + " "
			}
		case e.Action == "pass", e.Action == "fail", e.Action == "skip":
			all = append(all, testResult{name: e.Test, status: strings.ToUpper(e.Action), reason: strings.TrimSpace(logs[e.Test])})
			if !strings.Contains(e.Test, "/") {
				took = append(took, e)
			}
		}
	}
	slices.SortFunc(took, func(a, b event) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
	var times []string
	for _, e := range took {
		times = append(times, fmt.Sprintf("%s %.1fs", e.Test, e.Elapsed))
	}
	t.Logf("the guest's tests, longest first: %s", strings.Join(times, ", "))
	var leaves []testResult
	for _, r := range all {
		if slices.ContainsFunc(all, func(o testResult) bool { return strings.HasPrefix(o.name, r.name+"/") }) {
			continue
		}
		leaves = append(leaves, r)
		if r.status == "FAIL" {
			t.Errorf("%s failed: %s", r.name, shorten(r.reason, 2000))
		}
	}
	if len(leaves) == 0 {
		t.Errorf("the guest reported no test:\n%s", out)
	}
	return leaves
}

// shorten cuts s to about n bytes, saying so.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf(" ... (%d bytes more)", len(s)-n)
}

// consumer is the column of the matrix a test belongs to.
func consumer(test string) string {
	switch {
	case strings.HasPrefix(test, "TestRing"), strings.Contains(test, "/ring"), strings.HasPrefix(test, "TestTraceTypesRing"):
		return "trace ring"
	case strings.HasSuffix(test, "/tplist"):
		return "bcc tplist"
	case strings.HasSuffix(test, "/perf"):
		return "perf"
	case strings.HasPrefix(test, "TestGDB"):
		return "gdb"
	case strings.HasPrefix(test, "TestLibbpf"):
		return "libbpf"
	case strings.HasPrefix(test, "TestTraceValuesCorpus"):
		return "trace values"
	case strings.HasPrefix(test, "TestTraceStats"):
		return "trace -stats"
	case strings.HasPrefix(test, "TestTrace"), strings.HasPrefix(test, "TestAuto/Trace"):
		return "usdt-toolexec trace"
	}
	return "bpftrace"
}

var consumers = []string{"bpftrace", "usdt-toolexec trace", "trace values", "trace -stats", "trace ring", "libbpf", "gdb", "bcc tplist", "perf"}

// matrixRow is one machine's results.
type matrixRow struct {
	kernel, arch, accel string
	took                time.Duration
	results             []testResult
}

// formatMatrix writes the rows as a Markdown table, a cell per consumer
// with its tests' counts, then every skip's reason, and last every
// failure's: the end of a long log is what a CI summary keeps.
func formatMatrix(rows []matrixRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| kernel | arch | accel | time | %s |\n|---|---|---|---|%s\n", strings.Join(consumers, " | "), strings.Repeat("---|", len(consumers)))
	var skips, fails []string
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %v |", row.kernel, row.arch, row.accel, row.took.Round(time.Second))
		for _, c := range consumers {
			count := map[string]int{}
			for _, r := range row.results {
				if consumer(r.name) != c {
					continue
				}
				count[r.status]++
				switch r.status {
				case "SKIP":
					skips = append(skips, fmt.Sprintf("%s %s: %s: %s", row.kernel, row.arch, r.name, shorten(r.reason, 300)))
				case "FAIL":
					fails = append(fails, fmt.Sprintf("%s %s: %s: %s", row.kernel, row.arch, r.name, shorten(r.reason, 1500)))
				}
			}
			var cell []string
			for _, s := range []string{"PASS", "FAIL", "SKIP"} {
				if count[s] > 0 {
					cell = append(cell, fmt.Sprintf("%d %s", count[s], strings.ToLower(s)))
				}
			}
			if len(cell) == 0 {
				cell = []string{"-"}
			}
			fmt.Fprintf(&b, " %s |", strings.Join(cell, ", "))
		}
		b.WriteString("\n")
	}
	sort.Strings(skips)
	for _, s := range skips {
		fmt.Fprintf(&b, "skipped: %s\n", s)
	}
	for _, f := range fails {
		fmt.Fprintf(&b, "failed: %s\n", f)
	}
	return b.String()
}

// compatibilityDoc is docs/compatibility.md, whose table of the skips
// TestKernels allows is the one statement of them.
const compatibilityDoc = "../../../docs/compatibility.md"

// docName is compatibilityDoc as its messages name it.
const docName = "docs/compatibility.md"

// allowedSkipsHeader is the header of that table.
const allowedSkipsHeader = "| guest test | rows | the skip says | why |"

// allowedSkip is one line of that table: the guest tests its pattern
// matches (path.Match's, so * stays within one level of subtests) may
// skip on the rows it names ("host", or a kernel's vm.Kernel.Name) when
// the skip's message contains says.
type allowedSkip struct {
	pattern string
	rows    []string
	says    string
}

// allowedSkips reads the table of allowed skips from the document doc:
// the first table under allowedSkipsHeader, each cell's code
// quotes dropped, its rows separated by commas.
func allowedSkips(doc string) ([]allowedSkip, error) {
	b, err := os.ReadFile(doc)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	start := slices.Index(lines, allowedSkipsHeader)
	if start < 0 {
		return nil, fmt.Errorf("%s: no table headed %q: the skips TestKernels allows are listed there", doc, allowedSkipsHeader)
	}
	var allowed []allowedSkip
	for i, l := range lines[start+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(strings.ReplaceAll(cells[j], "`", ""))
		}
		if len(cells) != 4 || cells[0] == "" || cells[1] == "" || cells[2] == "" {
			return nil, fmt.Errorf("%s:%d: want a test, its rows, what its skip says and why: %s", doc, start+3+i, l)
		}
		if _, err := path.Match(cells[0], ""); err != nil {
			return nil, fmt.Errorf("%s:%d: pattern %q: %v", doc, start+3+i, cells[0], err)
		}
		a := allowedSkip{pattern: cells[0], says: cells[2]}
		for _, r := range strings.Split(cells[1], ",") {
			r = strings.TrimSpace(r)
			if r != "host" && !slices.Contains(vm.Expected, r) {
				return nil, fmt.Errorf("%s:%d: no row %q: the rows are host and %s", doc, start+3+i, r, strings.Join(vm.Expected, ", "))
			}
			a.rows = append(a.rows, r)
		}
		allowed = append(allowed, a)
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%s:%d: the table of allowed skips is empty", doc, start+1)
	}
	return allowed, nil
}

// checkSkips fails t for each of the row's skips that allowed does not
// list for it (a guest test that skips on a machine of the matrix checks
// nothing there), and for each line of allowed naming the row that no
// test skipped by: the table states what the rows skip today.
func checkSkips(t *testing.T, row string, results []testResult, allowed []allowedSkip) {
	t.Helper()
	for _, p := range skipProblems(row, results, allowed) {
		t.Error(p)
	}
}

// skipProblems is what checkSkips fails for.
func skipProblems(row string, results []testResult, allowed []allowedSkip) []string {
	var problems []string
	used := make([]bool, len(allowed))
	for _, r := range results {
		if r.status != "SKIP" {
			continue
		}
		ok := false
		for i, a := range allowed {
			if m, _ := path.Match(a.pattern, r.name); m && slices.Contains(a.rows, row) && strings.Contains(r.reason, a.says) {
				ok, used[i] = true, true
			}
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("%s skipped on %s, which the table %q of %s does not allow: %s", r.name, row, allowedSkipsHeader, docName, shorten(r.reason, 1000)))
		}
	}
	if len(results) == 0 {
		return problems
	}
	for i, a := range allowed {
		if !used[i] && slices.Contains(a.rows, row) {
			problems = append(problems, fmt.Sprintf("%s allows %s to skip on %s, saying %q, but no test skipped so: correct the table", docName, a.pattern, row, a.says))
		}
	}
	return problems
}

// TestAllowedSkips reads the table of allowed skips and checks it
// against a 5.10 row's skips as its guest reported them.
func TestAllowedSkips(t *testing.T) {
	allowed, err := allowedSkips(compatibilityDoc)
	if err != nil {
		t.Fatal(err)
	}
	cookies := "trace_test.go:62: this kernel (5.10.0-46-amd64) has no BPF cookies for uprobes (Linux 5.15+), without which ..."
	verifier := "libbpf_test.go:162: this kernel's verifier refuses libbpf's bpf_usdt_arg (a global function taking a pointer) at load, for every USDT program: 5.10.0-46-amd64"
	multi := "stats_test.go:177: this kernel makes no uprobe_multi link (Linux 6.6+ does): ..."
	results := []testResult{
		{"TestArguments/a/host", "PASS", ""},
		{"TestAuto/Trace/inst-pie", "SKIP", cookies},
		{"TestTraceValuesCorpus/plain/ring", "PASS", ""},
		{"TestLibbpf/a-toolexec-nocgo/host", "SKIP", verifier},
		{"TestLibbpf/notes/host", "SKIP", verifier},
		{"TestTraceStats/multi-text", "SKIP", multi},
	}
	if p := skipProblems("5.10-amd64", results, allowed); len(p) > 0 {
		t.Errorf("5.10's skips: %q, want none", p)
	}
	// The same on 6.1, where cookies and libbpf work.
	p := skipProblems("6.1-amd64", results, allowed)
	want := []string{"TestAuto/Trace/inst-pie", "TestLibbpf/a-toolexec-nocgo/host", "TestLibbpf/notes/host", "TestTracePIENeedsCookies"}
	if len(p) != len(want) {
		t.Errorf("6.1 with 5.10's skips: %q, want one problem each for %v", p, want)
	}
	for i := range min(len(p), len(want)) {
		if !strings.Contains(p[i], want[i]) {
			t.Errorf("problem %d: %q, want one naming %s", i, p[i], want[i])
		}
	}
	// A test that skips for a reason the table does not quote.
	attach := []testResult{{"TestTraceValuesCorpus/stripped", "SKIP", "tracetest: bpftrace host cannot attach probes on this machine"}}
	if p := skipProblems("6.1-arm64", attach, allowed); len(p) != 3 {
		t.Errorf("a skip for another reason: %q, want it and the two listed for 6.1-arm64 missing", p)
	}
}
