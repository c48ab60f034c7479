package e2e

// Build-correctness tests for go build -toolexec=usdt-toolexec with a rules
// file: the build cache, go test on the standard library, build flags,
// vendoring, workspaces, another toolexec wrapper, where the rules file is
// found, and package names shared by two import paths. Every expected probe
// name below is written from the rules and the fixture's source, by hand.

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// rulesA and rulesB select different functions of testdata/build. Their
// text never changes (no paths in them), so that packages built with them
// stay in the build cache from one run of the tests to the next.
const (
	rulesA = `provider: shop
rules:
  - package: example.com/build/shop
    inline: probe
    func: "Cart.*"
  - package: example.com/build
    inline: probe
    func: main
    probes: [entry]
`
	rulesB = `provider: shop
rules:
  - package: example.com/build/shop
    inline: probe
    func: Discount
  - package: example.com/build/shop
    inline: probe
    func: mix
    probes: [exit]
`
	// badRules has an unknown key at line 4, column 5.
	badRules = `provider: shop
rules:
  - package: example.com/build/shop
    fnc: "Cart.*"
`
)

var (
	// wantA are the probes rulesA gives testdata/build.
	wantA = []string{
		"entry__main__main",
		"entry__shop__Cart__Add", "exit__shop__Cart__Add",
		"entry__shop__Cart__Total", "exit__shop__Cart__Total",
	}
	// wantB are the probes rulesB gives testdata/build.
	wantB = []string{"entry__shop__Discount", "exit__shop__Discount", "exit__shop__mix"}
	// buildOutput is what testdata/build prints: 100+200+300, less 10%.
	buildOutput = "total 600 discounted 540 "
)

// usdtToolexec is the -toolexec flag for usdt-toolexec with args.
func usdtToolexec(args ...string) string {
	return "-toolexec=" + strings.Join(append([]string{wrapperBin()}, args...), " ")
}

// buildEnv is the environment of the build tests: no rules from the
// environment unless a test sets them, and the go command's default
// CGO_ENABLED replaced by an explicit one.
func buildEnv(extra ...string) []string {
	return append([]string{"USDT_RULES=", "CGO_ENABLED=0"}, extra...)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree copies testdata/name into a new directory as it is, then writes
// files (path relative to the tree: content), such as the go.mod and
// go.work files of multi-module layouts.
func tree(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := copyTestdata(t, name)
	for rel, content := range files {
		writeFile(t, filepath.Join(dir, rel), content)
	}
	return dir
}

// buildFixture lays out testdata/build, a module of its own that needs no
// go generate.
func buildFixture(t *testing.T) string {
	t.Helper()
	return tree(t, "build", map[string]string{"go.mod": "module example.com/build\n\ngo 1.24\n"})
}

// autoProbes returns the names of bin's probes, sorted, checking that each
// has the provider and a non-zero pc, base and semaphore.
func autoProbes(t *testing.T, bin, provider string) []string {
	t.Helper()
	var names []string
	for _, n := range readelfNotes(t, bin) {
		if n.provider != provider {
			t.Errorf("%s: probe %s:%s, want provider %s", bin, n.provider, n.name, provider)
		}
		for field, v := range map[string]string{"pc": n.pc, "base": n.base, "semaphore": n.semaphore} {
			if x, err := strconv.ParseUint(v, 0, 64); err != nil || x == 0 {
				t.Errorf("%s: probe %s: %s is %q, want non-zero", bin, n.name, field, v)
			}
		}
		names = append(names, n.name)
	}
	slices.Sort(names)
	return names
}

// checkProbes asserts that bin has exactly the probes want, each once.
func checkProbes(t *testing.T, bin, provider string, want []string) {
	t.Helper()
	got := autoProbes(t, bin, provider)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s: probes\n\t%v\nwant\n\t%v", filepath.Base(bin), got, want)
	}
}

// checkUninstrumented asserts that bin has no notes and none of the code
// the rewriter generates: a package compiled with probes and linked
// without the wrapper would have the second without the first.
func checkUninstrumented(t *testing.T, bin string) {
	t.Helper()
	if notes := readelfNotes(t, bin); len(notes) > 0 {
		t.Errorf("%s: %d probes, want none", bin, len(notes))
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if strings.Contains(s.Name, "usdtAuto") {
			t.Errorf("%s: instrumented code in a build without the wrapper: symbol %s", bin, s.Name)
		}
	}
}

// runOutput runs bin and checks that it prints want.
func runOutput(t *testing.T, bin string, env []string, want string) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), want) {
		t.Errorf("%s printed %q, want %q in it", bin, out, want)
	}
}

// compileLine matches a compile the go command's -x output shows.
var compileLine = regexp.MustCompile(`(?m)^.*/compile(\.exe)? .*$`)

// TestBuildCache builds testdata/build in a private, empty cache: plain,
// then with rules A, again with rules A, with rules B, plain again. Each
// build must use the packages its own configuration compiled and no
// others. The cold builds run with -p 4 and -p 1, where -p matters.
func TestBuildCache(t *testing.T) {
	dir := buildFixture(t)
	cacheEnv := buildEnv("GOCACHE=" + t.TempDir())
	rules := filepath.Join(dir, "rules.yml")
	toolexec := usdtToolexec("-rules", "rules.yml")
	bins := t.TempDir()
	bin := func(name string) string { return filepath.Join(bins, name) }

	// A plain build fills the cache with uninstrumented packages.
	goCmd(t, dir, cacheEnv, "build", "-o", bin("plain1"), ".")
	checkUninstrumented(t, bin("plain1"))

	// A toolexec build after it must not reuse them.
	writeFile(t, rules, rulesA)
	x := goCmd(t, dir, cacheEnv, "build", "-x", "-p", "4", toolexec, "-o", bin("a1"), ".")
	for _, pkg := range []string{"main", "example.com/build/shop", "runtime"} {
		if !regexp.MustCompile(`(?m)^.*/usdt-toolexec -rules rules\.yml \S*/compile(\.exe)? .*-p ` + regexp.QuoteMeta(pkg) + ` `).MatchString(x) {
			t.Errorf("the toolexec build did not compile %s through usdt-toolexec", pkg)
		}
	}
	checkProbes(t, bin("a1"), "shop", wantA)
	runOutput(t, bin("a1"), nil, buildOutput)

	// Unchanged: every package comes from the cache, the notes are the same.
	x = goCmd(t, dir, cacheEnv, "build", "-x", toolexec, "-o", bin("a2"), ".")
	if lines := compileLine.FindAllString(x, -1); len(lines) > 0 {
		t.Errorf("rebuild with the same rules compiled again:\n%s", strings.Join(lines, "\n"))
	}
	if a1, a2 := readelfNotes(t, bin("a1")), readelfNotes(t, bin("a2")); !slices.Equal(a1, a2) {
		t.Errorf("rebuild from the cache: notes\n\t%v\nwant the first build's\n\t%v", a2, a1)
	}
	if !sameFile(t, bin("a1"), bin("a2")) {
		t.Errorf("rebuild from the cache gave a different binary")
	}

	// Other rules: the new probes and only them.
	writeFile(t, rules, rulesB)
	goCmd(t, dir, cacheEnv, "build", "-p", "1", toolexec, "-o", bin("b"), ".")
	checkProbes(t, bin("b"), "shop", wantB)
	runOutput(t, bin("b"), nil, buildOutput)

	// A plain build after toolexec builds: the first plain build's
	// packages, from the cache, without probes.
	x = goCmd(t, dir, cacheEnv, "build", "-x", "-o", bin("plain2"), ".")
	if lines := compileLine.FindAllString(x, -1); len(lines) > 0 {
		t.Errorf("plain rebuild did not reuse the plain build's packages:\n%s", strings.Join(lines, "\n"))
	}
	checkUninstrumented(t, bin("plain2"))
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(da, db)
}

// TestBuildNoRulesIsPlain: without rules and without usdtgen packages the
// wrapper must change nothing in the executable. The build IDs differ by
// design (the wrapper is part of every tool's identity), so both builds
// set an empty one; -trimpath takes the fixture's directory out.
func TestBuildNoRulesIsPlain(t *testing.T) {
	dir := buildFixture(t)
	bins := t.TempDir()
	plain, wrapped := filepath.Join(bins, "plain"), filepath.Join(bins, "wrapped")
	goCmd(t, dir, buildEnv(), "build", "-trimpath", "-ldflags=-buildid=", "-o", plain, ".")
	goCmd(t, dir, buildEnv(), "build", "-trimpath", "-ldflags=-buildid=", usdtToolexec(), "-o", wrapped, ".")
	checkUninstrumented(t, wrapped)
	if !sameFile(t, plain, wrapped) {
		t.Errorf("a toolexec build without rules differs from the plain build")
	}
}

// TestBuildSourcesInMemory: the compile step hands the compiler the files
// it rewrites and generates through memory, not the disk, and the
// executable is the one built with them on disk, as they are through
// another -exec wrapper (env here), which may not pass descriptors on.
func TestBuildSourcesInMemory(t *testing.T) {
	dir := buildFixture(t)
	writeFile(t, filepath.Join(dir, "rules.yml"), rulesA)
	bins := t.TempDir()
	memory, disk := filepath.Join(bins, "memory"), filepath.Join(bins, "disk")
	out := goCmd(t, dir, buildEnv(), "build", "-a", "-work", "-trimpath", "-ldflags=-buildid=", usdtToolexec("-rules", "rules.yml"), "-o", memory, ".")
	work, ok := strings.CutPrefix(strings.TrimSpace(out), "WORK=")
	if !ok {
		t.Fatalf("go build -work printed %q, want WORK=dir", out)
	}
	defer os.RemoveAll(work)
	written, err := filepath.Glob(filepath.Join(work, "b*", "usdt_*.go"))
	if err != nil || len(written) > 0 {
		t.Errorf("the compile steps wrote %v (%v), want the Go files in memory", written, err)
	}
	goCmd(t, dir, buildEnv(), "build", "-a", "-trimpath", "-ldflags=-buildid=", usdtToolexec("-rules", "rules.yml", "-exec", "env"), "-o", disk, ".")
	checkProbes(t, memory, "shop", wantA)
	runOutput(t, memory, nil, buildOutput)
	if !sameFile(t, memory, disk) {
		t.Errorf("the executable built from files in memory differs from the one built from files on disk")
	}
}

// TestStdTestProbes lists the probes of standard packages' test binaries
// built as TestStdTests builds them, whose suites it runs.
func TestStdTestProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building instrumented standard library test binaries takes minutes")
	}
	tracetest.Require(t, "bpftrace")
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	writeFile(t, rules, stdRules(stdPackages, false))
	toolexec := usdtToolexec("-rules", rules)
	// Outside any module: a main module's go line would set GODEBUG
	// defaults the suites do not expect (go 1.24 keeps urlstrictcolons=0,
	// and net/url's own tests fail, with or without probes).
	env := buildEnv("GOFLAGS=")
	for _, c := range []struct {
		pkg  string
		want []string
	}{
		{"strings", []string{"entry__strings__Index", "exit__strings__Index", "entry__strings__Builder__WriteString", "exit__strings__Builder__WriteString"}},
		{"sort", []string{"entry__sort__Ints", "exit__sort__Ints", "entry__sort__IntSlice__Less", "exit__sort__IntSlice__Less"}},
		{"bytes", []string{"entry__bytes__Buffer__Write", "exit__bytes__Buffer__Write", "entry__bytes__NewBuffer", "exit__bytes__NewBuffer"}},
	} {
		bin := filepath.Join(dir, c.pkg+".test")
		goCmd(t, dir, env, "test", "-c", toolexec, "-o", bin, c.pkg)
		out, err := tracetest.Output(60e9, nil, "bpftrace", "-l", "usdt:"+bin+":*")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range c.want {
			if want := "usdt:" + bin + ":std:" + name + "\n"; !strings.Contains(out, want) {
				t.Errorf("bpftrace -l %s does not list std:%s", c.pkg+".test", name)
			}
		}
	}
}

// TestBuildFlags builds testdata/build with rules A and the flags people
// combine with -toolexec. (-p 1 and -p 4 are in TestBuildCache, whose
// builds are cold; here the standard library comes from the cache.)
func TestBuildFlags(t *testing.T) {
	dir := buildFixture(t)
	writeFile(t, filepath.Join(dir, "rules.yml"), rulesA)
	toolexec := usdtToolexec("-rules", "rules.yml")
	build := func(t *testing.T, dir string, env []string, flags ...string) string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "bin")
		goCmd(t, dir, env, append(append([]string{"build", toolexec, "-o", bin}, flags...), ".")...)
		return bin
	}

	t.Run("trimpath", func(t *testing.T) {
		bin := build(t, dir, buildEnv(), "-trimpath")
		checkProbes(t, bin, "shop", wantA)
		runOutput(t, bin, nil, buildOutput)
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(dir)) {
			t.Errorf("-trimpath binary contains the fixture's directory %s", dir)
		}
	})

	t.Run("cover", func(t *testing.T) {
		bin := build(t, dir, buildEnv(), "-cover")
		checkProbes(t, bin, "shop", wantA)
		covdir := t.TempDir()
		runOutput(t, bin, []string{"GOCOVERDIR=" + covdir}, buildOutput)
		// The run executes every statement of both packages.
		out := goCmd(t, dir, nil, "tool", "covdata", "percent", "-i", covdir)
		for _, pkg := range []string{"example.com/build", "example.com/build/shop"} {
			if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(pkg) + `\s+coverage: 100\.0% of statements$`).MatchString(out) {
				t.Errorf("coverage of %s is not 100%%:\n%s", pkg, out)
			}
		}
	})

	t.Run("test-cover", func(t *testing.T) {
		// shop_test.go runs Add, Total and Discount: 6 of shop's 13
		// statements.
		out := goCmd(t, dir, buildEnv(), "test", "-count=1", "-cover", toolexec, "./shop")
		if !strings.Contains(out, "coverage: 46.2% of statements") {
			t.Errorf("go test -cover: want 46.2%% coverage:\n%s", out)
		}
		bin := filepath.Join(t.TempDir(), "shop.test")
		goCmd(t, dir, buildEnv(), "test", "-c", "-cover", toolexec, "-o", bin, "./shop")
		// The test main go test generates is package main but not
		// example.com/build: its main is not selected.
		checkProbes(t, bin, "shop", wantA[1:])
	})

	t.Run("pgo", func(t *testing.T) {
		// A fixture of its own: with default.pgo in the main package,
		// every build of it uses the profile.
		dir := buildFixture(t)
		writeFile(t, filepath.Join(dir, "rules.yml"), rulesA)
		profiler := filepath.Join(t.TempDir(), "profiler")
		goCmd(t, dir, buildEnv(), "build", "-tags", "usdt_e2e_pgo", "-o", profiler, ".")
		profile := filepath.Join(dir, "default.pgo")
		if out, err := exec.Command(profiler, profile).CombinedOutput(); err != nil {
			t.Fatalf("writing the CPU profile: %v\n%s", err, out)
		}
		bin := build(t, dir, buildEnv(), "-pgo=auto")
		checkProbes(t, bin, "shop", wantA)
		runOutput(t, bin, nil, buildOutput)
		out := goCmd(t, dir, nil, "version", "-m", bin)
		if !strings.Contains(out, "\tbuild\t-pgo="+profile+"\n") {
			t.Errorf("the binary was not built with %s:\n%s", profile, out)
		}
	})

	t.Run("race", func(t *testing.T) {
		if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
			t.Skipf("no race detector on %s here", runtime.GOARCH)
		}
		if !tracetest.Have("gcc") {
			tracetest.SkipMissing(t, "-race needs cgo and gcc is not on PATH (scripts/setup.sh)")
		}
		bin := build(t, dir, buildEnv("CGO_ENABLED=1"), "-race")
		checkProbes(t, bin, "shop", wantA)
		runOutput(t, bin, nil, buildOutput)
	})

	t.Run("pie", func(t *testing.T) {
		bin := build(t, dir, buildEnv(), "-buildmode=pie")
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != elf.ET_DYN {
			t.Errorf("-buildmode=pie gave ELF type %v, want ET_DYN", f.Type)
		}
		f.Close()
		checkProbes(t, bin, "shop", wantA)
		runOutput(t, bin, nil, buildOutput)
	})
}

// modsRules selects functions of both modules of testdata/buildmods.
const modsRules = `provider: mods
rules:
  - package: example.com/lib/...
    inline: probe
  - package: example.com/app
    inline: probe
    func: main
`

// wantMods are the probes modsRules gives testdata/buildmods/app.
var wantMods = []string{
	"entry__calc__Sum", "exit__calc__Sum",
	"entry__calc__Scale__Apply", "exit__calc__Scale__Apply",
	"entry__main__main", "exit__main__main",
}

// modsOutput is what testdata/buildmods/app prints.
const modsOutput = "sum 6 scaled 15"

const libGoMod = "module example.com/lib\n\ngo 1.24\n"

// TestBuildVendor builds a main module whose dependency, another module
// replaced by a local directory, is vendored; the directory is gone by
// build time, so only vendor/ can supply the package. A module's vendored
// packages keep their import paths (the compiler's importcfg has no
// importmap line for them): the importmap lines come from the standard
// library's own vendored packages, which the std-vendor case imports.
func TestBuildVendor(t *testing.T) {
	t.Run("module", func(t *testing.T) {
		dir := tree(t, "buildmods", map[string]string{
			"app/go.mod":    "module example.com/app\n\ngo 1.24\n\nrequire example.com/lib v0.0.0\n\nreplace example.com/lib => ../lib\n",
			"lib/go.mod":    libGoMod,
			"app/rules.yml": modsRules,
		})
		app := filepath.Join(dir, "app")
		env := buildEnv("GOFLAGS=")
		goCmd(t, app, env, "mod", "vendor")
		if err := os.RemoveAll(filepath.Join(dir, "lib")); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(t.TempDir(), "app")
		goCmd(t, app, env, "build", "-mod=vendor", usdtToolexec("-rules", "rules.yml"), "-o", bin, ".")
		checkProbes(t, bin, "mods", wantMods)
		runOutput(t, bin, nil, modsOutput)
	})

	t.Run("std-vendor", func(t *testing.T) {
		// net imports golang.org/x/net/dns/dnsmessage, which its
		// importcfg maps to vendor/golang.org/x/net/dns/dnsmessage: type
		// checking net for the rewriter needs that importmap line.
		dir := tree(t, "buildnet", map[string]string{
			"go.mod": "module example.com/netuser\n\ngo 1.24\n",
			"rules.yml": `provider: std
rules:
  - package: net
    inline: probe
    func: ParseIP
  - package: net
    inline: probe
    func: JoinHostPort
`,
		})
		bin := filepath.Join(t.TempDir(), "netuser")
		goCmd(t, dir, buildEnv(), "build", usdtToolexec("-rules", "rules.yml"), "-o", bin, ".")
		checkProbes(t, bin, "std", []string{"entry__net__ParseIP", "exit__net__ParseIP", "entry__net__JoinHostPort", "exit__net__JoinHostPort"})
		runOutput(t, bin, nil, "10.0.0.1:80")
	})
}

// TestBuildWorkspace builds from the root of a go.work that uses two
// modules, with one rules file selecting functions from both.
func TestBuildWorkspace(t *testing.T) {
	dir := tree(t, "buildmods", map[string]string{
		"go.work":    "go 1.24\n\nuse (\n\t./app\n\t./lib\n)\n",
		"app/go.mod": "module example.com/app\n\ngo 1.24\n\nrequire example.com/lib v0.0.0\n",
		"lib/go.mod": libGoMod,
		"rules.yml":  modsRules,
	})
	bin := filepath.Join(t.TempDir(), "app")
	// Workspace mode refuses -mod=mod, which the harness sets.
	goCmd(t, dir, buildEnv("GOFLAGS="), "build", usdtToolexec("-rules", "rules.yml"), "-o", bin, "./app")
	checkProbes(t, bin, "mods", wantMods)
	runOutput(t, bin, nil, modsOutput)
}

// TestBuildOtherWrapper composes usdt-toolexec with another toolexec
// wrapper, nested both ways.
func TestBuildOtherWrapper(t *testing.T) {
	wrapDir := tree(t, "buildwrap", map[string]string{"go.mod": "module example.com/otherwrap\n\ngo 1.24\n"})
	wrapper := filepath.Join(t.TempDir(), "otherwrap")
	goCmd(t, wrapDir, buildEnv(), "build", "-o", wrapper, ".")
	usdt := wrapperBin()

	for _, c := range []struct {
		name, toolexec string
		// each must match a line of the other wrapper's log
		want []string
	}{
		{
			name:     "usdt-outside",
			toolexec: usdt + " -rules rules.yml -exec " + wrapper,
			want: []string{
				// the identity query, the instrumented compile, the
				// probe stubs usdt-toolexec assembles, the link
				`^\S*/compile(\.exe)? -V=full$`,
				`^\S*/compile(\.exe)? .*-p example\.com/build/shop .*/usdt_auto_probes\.go`,
				`^\S*/asm(\.exe)? .*/usdt_auto_probes\.s$`,
				`^\S*/link(\.exe)? .*-o `,
			},
		},
		{
			name:     "usdt-inside",
			toolexec: wrapper + " " + usdt + " -rules rules.yml",
			want: []string{
				`^` + regexp.QuoteMeta(usdt) + ` -rules rules\.yml \S*/compile(\.exe)? -V=full$`,
				`^` + regexp.QuoteMeta(usdt) + ` -rules rules\.yml \S*/compile(\.exe)? .*-p example\.com/build/shop `,
				`^` + regexp.QuoteMeta(usdt) + ` -rules rules\.yml \S*/link(\.exe)? .*-o `,
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A fixture of its own: in another subtest's directory, the
			// fixture's packages would come from the cache. (The other
			// wrapper does not add itself to the tools' identity.)
			dir := buildFixture(t)
			writeFile(t, filepath.Join(dir, "rules.yml"), rulesA)
			log := filepath.Join(t.TempDir(), "wrap.log")
			bin := filepath.Join(t.TempDir(), "bin")
			goCmd(t, dir, buildEnv("USDT_E2E_WRAP_LOG="+log), "build", "-toolexec="+c.toolexec, "-o", bin, ".")
			checkProbes(t, bin, "shop", wantA)
			runOutput(t, bin, nil, buildOutput)
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatalf("the other wrapper left no log: %v", err)
			}
			for _, re := range c.want {
				if !regexp.MustCompile(`(?m)` + re).Match(data) {
					t.Errorf("no line of the other wrapper's log matches %s", re)
				}
			}
			if t.Failed() {
				t.Logf("the other wrapper's log:\n%s", data)
			}
		})
	}
}

// TestBuildRulesLocation checks where the rules come from: -rules, taken
// relative to the go command's directory; $USDT_RULES; usdt.yml at the
// main module's root; in that order. A bad rules file fails the build
// with its position, and writes no binary.
func TestBuildRulesLocation(t *testing.T) {
	dir := buildFixture(t)
	sub := filepath.Join(dir, "shop")
	// rules B in the subdirectory only: a -rules path taken relative to
	// the module root would name a file that does not exist.
	writeFile(t, filepath.Join(sub, "local.yml"), rulesB)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.yml")
	writeFile(t, elsewhere, rulesB)
	bin := func(t *testing.T) string { return filepath.Join(t.TempDir(), "bin") }

	t.Run("flag-relative-from-subdir", func(t *testing.T) {
		out := bin(t)
		goCmd(t, sub, buildEnv(), "build", usdtToolexec("-rules", "local.yml"), "-o", out, "..")
		checkProbes(t, out, "shop", wantB)
	})
	t.Run("env-absolute", func(t *testing.T) {
		out := bin(t)
		goCmd(t, dir, buildEnv("USDT_RULES="+elsewhere), "build", usdtToolexec(), "-o", out, ".")
		checkProbes(t, out, "shop", wantB)
	})
	t.Run("env-relative-from-subdir", func(t *testing.T) {
		out := bin(t)
		goCmd(t, sub, buildEnv("USDT_RULES=local.yml"), "build", usdtToolexec(), "-o", out, "..")
		checkProbes(t, out, "shop", wantB)
	})

	// From here on the module has a usdt.yml.
	writeFile(t, filepath.Join(dir, "usdt.yml"), rulesA)
	t.Run("usdt.yml-from-subdir", func(t *testing.T) {
		out := bin(t)
		goCmd(t, sub, buildEnv(), "build", usdtToolexec(), "-o", out, "..")
		checkProbes(t, out, "shop", wantA)
	})
	t.Run("env-over-usdt.yml", func(t *testing.T) {
		out := bin(t)
		goCmd(t, dir, buildEnv("USDT_RULES="+elsewhere), "build", usdtToolexec(), "-o", out, ".")
		checkProbes(t, out, "shop", wantB)
	})
	t.Run("flag-over-env", func(t *testing.T) {
		out := bin(t)
		goCmd(t, dir, buildEnv("USDT_RULES="+elsewhere), "build", usdtToolexec("-rules", "usdt.yml"), "-o", out, ".")
		checkProbes(t, out, "shop", wantA)
	})

	badFile := filepath.Join(t.TempDir(), "bad.yml")
	writeFile(t, badFile, badRules)
	for _, c := range []struct {
		name, file string
		flags      []string
	}{
		{"bad-flag", badFile, []string{"-rules", badFile}},
		{"bad-usdt.yml", filepath.Join(dir, "usdt.yml"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.flags == nil {
				writeFile(t, c.file, badRules)
			}
			out := bin(t)
			msg, err := goRun(dir, buildEnv(), "build", usdtToolexec(c.flags...), "-o", out, ".")
			if err == nil {
				t.Fatalf("build with a bad rules file succeeded:\n%s", msg)
			}
			if want := c.file + ":4:5: "; !strings.Contains(msg, want) {
				t.Errorf("the error does not say %q:\n%s", want, msg)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a failed build left %s (stat: %v)", out, err)
			}
		})
	}
}

// TestBuildSamePackageName links two selected packages named util; the
// link step names their probes by import path. A binary with one of them
// keeps the short name.
func TestBuildSamePackageName(t *testing.T) {
	dir := tree(t, "builddup", map[string]string{
		"go.mod": "module example.com\n\ngo 1.24\n",
		"rules.yml": `provider: dup
rules:
  - package: example.com/a/util
    inline: probe
  - package: example.com/b/util
    inline: probe
  - package: example.com/c/...
    inline: probe
`,
	})
	toolexec := usdtToolexec("-rules", "rules.yml")
	bin := filepath.Join(t.TempDir(), "dup")
	goCmd(t, dir, buildEnv(), "build", toolexec, "-o", bin, ".")
	checkProbes(t, bin, "dup", []string{
		"entry__example_com_a_util__Join", "exit__example_com_a_util__Join",
		"entry__example_com_a_util__Sep__Between", "exit__example_com_a_util__Sep__Between",
		"entry__example_com_b_util__Join", "exit__example_com_b_util__Join",
		"entry__example_com_b_util__Sep__Between", "exit__example_com_b_util__Sep__Between",
		"entry__other__Twice", "exit__other__Twice",
	})
	runOutput(t, bin, nil, "xay xby p-q p+q 42")

	one := filepath.Join(t.TempDir(), "one")
	goCmd(t, dir, buildEnv(), "build", toolexec, "-o", one, "./cmd/one")
	checkProbes(t, one, "dup", []string{
		"entry__util__Join", "exit__util__Join",
		"entry__util__Sep__Between", "exit__util__Sep__Between",
	})
}

// TestBuildKeepsUnusedMethodsOut: a method nothing calls stays out of the
// executable when its receiver type reaches probes. The linker keeps every
// method of a type converted to an interface that some interface method
// call could reach (fmt calls String), so probes must pass pointers and
// results without such conversions.
func TestBuildKeepsUnusedMethodsOut(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/unused\n\ngo 1.24\n")
	writeFile(t, filepath.Join(dir, "rules.yml"), "provider: unused\nrules:\n  - package: example.com/unused\n    inline: probe\n")
	writeFile(t, filepath.Join(dir, "rules-deferred.yml"), "provider: unused\nrules:\n  - package: example.com/unused\n    unwind: true\n    inline: probe\n")
	writeFile(t, filepath.Join(dir, "main.go"), `package main

import "fmt"

type T struct{ n int }

func (t *T) String() string { return fmt.Sprintf("T(%d)", t.n) }

func (t T) GoString() string { return fmt.Sprintf("T{%d}", t.n) }

//go:noinline
func ptr(p *T) *T { return p }

//go:noinline
func val(n int) (t T) { t.n = n; return t }

func main() { fmt.Println(ptr(&T{1}).n + val(2).n) }
`)
	for _, cfg := range []struct{ name, toolexec string }{
		{"plain", ""},
		{"probed", usdtToolexec("-rules", "rules.yml")},
		{"deferred", usdtToolexec("-rules", "rules-deferred.yml")},
	} {
		bin := filepath.Join(t.TempDir(), cfg.name)
		args := []string{"build", "-o", bin, "."}
		if cfg.toolexec != "" {
			args = []string{"build", cfg.toolexec, "-o", bin, "."}
		}
		goCmd(t, dir, buildEnv(), args...)
		runOutput(t, bin, nil, "3")
		if cfg.toolexec != "" {
			checkProbes(t, bin, "unused", []string{"entry__main__main", "exit__main__main", "entry__main__ptr", "exit__main__ptr", "entry__main__val", "exit__main__val",
				"entry__main__T__String", "exit__main__T__String", "entry__main__T__GoString", "exit__main__T__GoString"})
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		syms, err := f.Symbols()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range syms {
			if strings.HasPrefix(s.Name, "main.") && strings.Contains(s.Name, "String") {
				t.Errorf("%s build: unused method %s is in the executable", cfg.name, s.Name)
			}
		}
	}
}

// TestBuildOpenCodesExitProbes: the deferred call behind an exit probe is
// open-coded, so that an untraced call pays a test on the way out, also in
// a function with more returns than Go open-codes a deferred call for (its
// returns times its defers over 15): instrumented, it leaves through one
// return. Without that, every return calls runtime.deferreturn, traced or
// not, after runtime.deferprocStack registered the call.
func TestBuildOpenCodesExitProbes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/returns\n\ngo 1.24\n")
	writeFile(t, filepath.Join(dir, "rules.yml"), "provider: returns\nrules:\n  - package: example.com/returns\n    unwind: true\n    inline: probe\n")
	var cases strings.Builder
	for i := range 20 {
		fmt.Fprintf(&cases, "\tcase %d:\n\t\treturn %q\n", i, strconv.Itoa(i*i))
	}
	writeFile(t, filepath.Join(dir, "main.go"), `package main

import "fmt"

func name(n int) string {
	switch n {
`+cases.String()+`	}
	return "?"
}

func main() { fmt.Println(name(3), name(19), name(20)) }
`)
	bin := filepath.Join(dir, "probed")
	goCmd(t, dir, buildEnv(), "build", usdtToolexec("-rules", "rules.yml"), "-o", bin, ".")
	runOutput(t, bin, nil, "9 361 ?")
	checkProbes(t, bin, "returns", []string{"entry__main__main", "exit__main__main", "entry__main__name", "exit__main__name"})
	dump := goCmd(t, dir, nil, "tool", "objdump", "-s", `^main\.name$`, bin)
	if !strings.Contains(dump, "TEXT main.name(SB)") {
		t.Fatalf("no main.name in the objdump output:\n%s", dump)
	}
	for _, call := range []string{"runtime.deferprocStack", "runtime.deferproc("} {
		if strings.Contains(dump, "CALL "+call) {
			t.Errorf("main.name calls %s: its exit probe's deferred call is not open-coded", call)
		}
	}
	if rets := strings.Count(dump, "\tRET"); rets > 2 {
		t.Errorf("main.name has %d RET instructions, want one return and the one after a recovered panic", rets)
	}
}

// TestBuildKeepsElementMethodsOut is TestBuildKeepsUnusedMethodsOut for
// slices, maps, channels and funcs of a type whose String method nothing
// calls: converting any of them to an interface would keep the method, as
// their type descriptors name the element type. A module older than
// generics (Go 1.16) has its probes read them through an interface; it
// must still build and run the same.
func TestBuildKeepsElementMethodsOut(t *testing.T) {
	for _, c := range []struct {
		goVersion  string
		wantUnused bool
	}{
		{"1.24", true},
		{"1.16", false},
	} {
		t.Run("go"+c.goVersion, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/unused\n\ngo "+c.goVersion+"\n")
			writeFile(t, filepath.Join(dir, "rules.yml"), "provider: unused\nrules:\n  - package: example.com/unused\n    inline: probe\n")
			writeFile(t, filepath.Join(dir, "main.go"), `package main

import "fmt"

type celsius float64

func (c celsius) String() string { return fmt.Sprintf("%.1f°C", float64(c)) }

func warmest(cs []celsius) (max float64) {
	for _, c := range cs {
		if float64(c) > max {
			max = float64(c)
		}
	}
	return max
}

func count(m map[string]celsius, ch chan celsius, f func(celsius) bool) (n int) {
	for _, c := range m {
		if f(c) {
			n++
		}
	}
	for c := range ch {
		if f(c) {
			n++
		}
	}
	return n
}

func main() {
	ch := make(chan celsius, 1)
	ch <- 30
	close(ch)
	hot := func(c celsius) bool { return c > 25 }
	fmt.Println(warmest([]celsius{12, 31.5, 7}), count(map[string]celsius{"a": 26, "b": 3}, ch, hot))
}
`)
			const method = "main.celsius.String"
			plain := filepath.Join(dir, "plain")
			probed := filepath.Join(dir, "probed")
			goCmd(t, dir, buildEnv(), "build", "-o", plain, ".")
			goCmd(t, dir, buildEnv(), "build", usdtToolexec("-rules", "rules.yml"), "-o", probed, ".")
			runOutput(t, plain, nil, "31.5 2")
			runOutput(t, probed, nil, "31.5 2")
			checkProbes(t, probed, "unused", []string{
				"entry__main__count", "exit__main__count", "entry__main__main", "exit__main__main",
				"entry__main__celsius__String", "exit__main__celsius__String",
				"entry__main__warmest", "exit__main__warmest",
			})
			if strings.Contains(goCmd(t, dir, nil, "tool", "nm", plain), method) {
				t.Fatalf("the plain build has %s: the program no longer shows what this test is about", method)
			}
			if !c.wantUnused {
				return
			}
			if syms := goCmd(t, dir, nil, "tool", "nm", probed); strings.Contains(syms, method) {
				t.Errorf("the instrumented build has %s, which the plain one leaves out: a probe converted a value to an interface", method)
			}
		})
	}
}
