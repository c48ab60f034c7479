package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// stdPackages are the standard packages whose test suites run
// instrumented: parsers, printers, encoders, containers, concurrency,
// reflection, an HTTP client and server, and go/types, which has
// functions of every shape.
var stdPackages = []string{
	"archive/tar", "archive/zip", "bufio", "bytes", "compress/flate",
	"container/heap", "container/list", "context", "crypto/aes",
	"crypto/sha256", "database/sql", "encoding/asn1", "encoding/base64",
	"encoding/binary", "encoding/csv", "encoding/gob", "encoding/json",
	"encoding/xml", "errors", "fmt", "go/ast", "go/constant", "go/doc",
	"go/parser", "go/printer", "go/scanner", "go/types", "hash/crc32",
	"html/template", "image/png", "io", "log/slog", "maps", "math",
	"math/big", "mime", "net/http", "net/netip", "net/url", "os", "os/exec",
	"path/filepath", "reflect", "regexp", "slices", "sort", "strconv",
	"strings", "sync", "text/scanner", "text/tabwriter", "text/template",
	"time", "unicode", "unicode/utf8",
}

// inlineProbed are the standard packages whose inlined functions keep
// their probes (inline: probe) in TestStdTests' run with the exit probes
// at the returns. bytes' TestNewBufferShallow asserts that
// `*NewBuffer(b)` copies a Buffer without allocating, which holds only
// while NewBuffer is inlined. Instrumented, it still is: a small
// function keeps its body behind the semaphore's branch and calls a
// traced copy only while traced (TestStdTestProbes checks that its
// probes are there).
var inlineProbed = []string{"bytes", "encoding/json", "net/url", "sort", "strconv", "strings"}

// stdRules are the rules of TestStdTests' run of pkgs: every function of
// each instrumented, with the exit probes deferred (unwind) or at the
// returns, where inlineProbed's inlined functions keep their probes.
// TestStdTestProbes builds with the same bytes, and so finds the
// packages in the go command's cache.
func stdRules(pkgs []string, unwind bool) string {
	text := "provider: std\nrules:\n"
	for _, p := range pkgs {
		text += fmt.Sprintf("  - package: %q\n    unwind: %v\n", p, unwind)
		if !unwind && slices.Contains(inlineProbed, p) {
			text += "    inline: probe\n"
		}
	}
	return text
}

// allocationTests count what a call allocates. Instrumented, a function
// that Go inlined stays out of line, and a value that did not escape
// through it goes to the heap (docs/rules.md, "Escape analysis
// follows inlining"): these fail, traced or not, and nothing else may.
const allocationTests = "^(TestNewIntAllocs|TestCountMallocs|TestAllocations|TestAllocatonsWithTypeAsserts|TestMapIterSet)$"

var (
	passedPackage = regexp.MustCompile(`(?m)^ok\s`)
	failedPackage = regexp.MustCompile(`(?m)^FAIL\t(\S+)`)
)

// TestStdTests runs the test suites of standard packages with every
// function of those packages instrumented: a suite that passes plain must
// pass instrumented. With the exit probes at the returns (the default)
// every package runs; with them deferred (unwind: true) those whose code
// recovers panics, where a deferred probe meets a panic (the other
// suites' panics are the test's, not recovered). A package that fails
// instrumented runs again plain, and fails the test only if it passes
// that way.
//
// The rules name the packages, not "...": instrumenting every function of
// the test binaries compiled the rest of the standard library
// instrumented too, and the run with the returns took 390 s with the
// go command's cache warm, against 45 s (328 s when a new wrapper makes
// it cold, as in CI); each package's functions are checked by their own
// suite, and by those of the packages above it. In the run with the
// returns, inlineProbed's inlined functions keep their probes.
func TestStdTests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the test suites of 55 standard packages, built twice, take minutes")
	}
	dir := t.TempDir()
	for _, unwind := range []bool{false, true} {
		t.Run(fmt.Sprintf("unwind=%v", unwind), func(t *testing.T) {
			pkgs := stdPackages
			if unwind {
				pkgs = recovering(t, stdPackages)
				t.Logf("the packages that recover panics: %s", strings.Join(pkgs, " "))
			}
			rules := filepath.Join(dir, fmt.Sprintf("rules-%v.yml", unwind))
			if err := os.WriteFile(rules, []byte(stdRules(pkgs, unwind)), 0o644); err != nil {
				t.Fatal(err)
			}
			toolexec := "-toolexec=" + wrapperBin() + " -rules " + rules
			out, failed, err := goTestStd(dir, toolexec, pkgs)
			if err == nil {
				t.Logf("%d packages passed instrumented", len(passedPackage.FindAllStringIndex(out, -1)))
				return
			}
			if len(failed) == 0 {
				t.Fatalf("go test, instrumented: %v\n%s", err, out)
			}
			_, failedPlain, plainErr := goTestStd(dir, "", failed)
			for _, p := range failed {
				if slices.Contains(failedPlain, p) {
					t.Logf("%s fails plain too (%v): not the instrumentation's doing", p, plainErr)
				} else {
					t.Errorf("%s passes plain but fails instrumented", p)
				}
			}
			if t.Failed() {
				t.Logf("instrumented:\n%s", out)
			}
		})
	}
}

// recovering returns the packages of pkgs whose own (non-test) files call
// recover.
func recovering(t *testing.T, pkgs []string) []string {
	t.Helper()
	goroot := strings.TrimSpace(goCmd(t, "", nil, "env", "GOROOT"))
	var out []string
	for _, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(goroot, "src", p, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "recover()") {
				out = append(out, p)
				break
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no package of %s calls recover: the search is wrong", strings.Join(pkgs, " "))
	}
	return out
}

// goTestStd runs the short tests of the standard packages pkgs, but for
// allocationTests, with the go flag toolexec unless it is empty and the
// other go test flags, and returns the output and the packages that
// failed.
func goTestStd(dir, toolexec string, pkgs []string, flags ...string) (out string, failed []string, err error) {
	args := append([]string{"test", "-count=1", "-short", "-skip", allocationTests}, flags...)
	if toolexec != "" {
		args = append(args, toolexec)
	}
	out, err = goRun(dir, []string{"CGO_ENABLED=0", "GOFLAGS="}, append(args, pkgs...)...)
	for _, m := range failedPackage.FindAllStringSubmatch(out, -1) {
		failed = append(failed, m[1])
	}
	return out, failed, err
}

// stdSwitched are the standard packages whose suites
// TestStdTestsSwitched runs with every function switched: parsers,
// encoders, containers, formatting, arithmetic.
var stdSwitched = []string{"bufio", "bytes", "container/list", "encoding/json", "fmt", "math/big", "regexp", "sort", "strconv", "strings"}

// switchedAtStart is what usdt-toolexec switch -v says of a command it
// switched before its first instruction.
var switchedAtStart = regexp.MustCompile(`(?m)usdt-toolexec switch: (\d+) of (\d+) functions of process \d+ switched at its start$`)

// TestStdTestsSwitched runs the test suites of stdSwitched built with
// sites: switch on each package, each test binary under usdt-toolexec
// switch -- (go test -exec), which switches every function of the
// binary with a traced copy before its first instruction: the copies,
// with their probes off, run the suites in the functions' place, and
// every suite must pass as it does plain.
func TestStdTestsSwitched(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the test suites of 10 standard packages, built with copies, take minutes")
	}
	dir := t.TempDir()
	text := "provider: std\nrules:\n"
	for _, p := range stdSwitched {
		text += fmt.Sprintf("  - package: %q\n    sites: switch\n", p)
	}
	rules := filepath.Join(dir, "rules-switch.yml")
	if err := os.WriteFile(rules, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every function of std: path.Match's * stops at a slash.
	switcher := "-exec=" + filepath.Join(toolsDir, "usdt-toolexec") + " switch -v * */* */*/* --"
	out, failed, err := goTestStd(dir, "-toolexec="+wrapperBin()+" -rules "+rules, stdSwitched, "-v", switcher)
	if err != nil && len(failed) == 0 {
		t.Fatalf("go test, switched: %v\n%s", err, out[max(0, len(out)-20000):])
	}
	for _, p := range failed {
		t.Errorf("%s fails switched", p)
	}
	said := switchedAtStart.FindAllStringSubmatch(out, -1)
	total := 0
	for _, m := range said {
		n, _ := strconv.Atoi(m[1])
		total += n
		if n == 0 {
			t.Errorf("a test binary ran with none of its %s functions with copies switched", m[2])
		}
	}
	if len(said) != len(stdSwitched) {
		t.Errorf("switch said it switched %d test binaries, want %d", len(said), len(stdSwitched))
	}
	t.Logf("%d functions switched in %d test binaries", total, len(said))
	if t.Failed() {
		t.Logf("switched:\n%s", out[max(0, len(out)-50000):])
	}
}
