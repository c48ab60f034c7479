package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/inlining"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// buildInlining builds statsSrc plain and with rules, both with the
// compiler's inlining decisions on its package (-m=2), and returns the
// probed binary, what the compiler said of each build and the wrapper's
// -v output.
func buildInlining(t *testing.T, rules string) (bin string, plain, probed inlining.Build, verbose string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/stats\n\ngo 1.24\n")
	writeFile(t, filepath.Join(dir, "main.go"), statsSrc)
	writeFile(t, filepath.Join(dir, "rules.yml"), rules)
	gcflags := "-gcflags=example.com/stats=-m=2"
	plain = readInlining(t, goCmd(t, dir, buildEnv(), "build", "-a", gcflags, "-o", filepath.Join(dir, "plain"), "."))
	bin = filepath.Join(dir, "probed")
	out := goCmd(t, dir, buildEnv(), "build", "-a", gcflags, "-o", bin, usdtToolexec("-v", "-rules", filepath.Join(dir, "rules.yml")), ".")
	return bin, plain, readInlining(t, out), out
}

// readInlining reads what go build -gcflags=...=-m=2 printed.
func readInlining(t *testing.T, out string) inlining.Build {
	t.Helper()
	b, err := inlining.Read(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInlinedKept builds a program whose small functions the compiler
// inlines, with every function selected by a rule that says inline:
// keep: those stay as written, unprobed, and -v and usdt-toolexec list
// say so; the compiler inlines in the probed build every function and
// call it inlines in the plain one; the others have their probes.
func TestInlinedKept(t *testing.T) {
	bin, plain, probed, verbose := buildInlining(t, "provider: stats\nrules:\n  - package: example.com/stats\n    exclude: [main]\n    inline: keep\n")
	if lost := inlining.Lost(plain, probed); len(lost) > 0 {
		t.Errorf("the probed build no longer inlines:\n%s", strings.Join(lost, "\n"))
	}
	for _, fn := range []string{"fast", "nap", "counted"} {
		if !strings.Contains(verbose, fmt.Sprintf("main.%s: not probed: the compiler inlines it", fn)) {
			t.Errorf("-v does not say main.%s stays inlined:\n%s", fn, verbose)
		}
	}
	checkProbes(t, bin, "stats", []string{"entry__main__fib", "exit__main__fib"})
	list := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "list", bin)
	var stderr strings.Builder
	list.Stderr = &stderr
	if err := list.Run(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "usdt-toolexec list: 3 functions the rules select are not probed: the compiler inlines them") {
		t.Errorf("usdt-toolexec list does not say three functions are not probed:\n%s", stderr.String())
	}
	out, err := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "list", "-inlined", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "example.com/stats.counted\nexample.com/stats.fast\nexample.com/stats.nap\n"; got != want {
		t.Errorf("usdt-toolexec list -inlined printed\n%s\nwant\n%s", got, want)
	}
}

// TestInlinedProbed builds the same program with rules that leave inline
// to its default, probe: fast and counted are probed and still inlined
// into their callers, and both bpftrace and usdt-toolexec trace count
// every call of them, which fire from the inlined copies. nap (cost 60
// of 80) cannot keep both its inlining and its probes, and the rule
// chose the probes; -v says which is which.
func TestInlinedProbed(t *testing.T) {
	bin, plain, probed, verbose := buildInlining(t, statsRules)
	for _, l := range inlining.Lost(plain, probed) {
		if !strings.Contains(l, " nap ") {
			t.Errorf("the probed build no longer inlines: %s", l)
		}
	}
	for _, want := range []string{"main.nap: loses its inlining", "main.fast: the compiler inlines it (cost", "main.counted: the compiler inlines it (cost"} {
		if !strings.Contains(verbose, want) {
			t.Errorf("-v does not say %q:\n%s", want, verbose)
		}
	}
	for _, fn := range []string{"fast", "counted"} {
		inlined := 0
		for c, n := range probed.Calls {
			if c.Name == fn {
				inlined += n
			}
		}
		if inlined == 0 {
			t.Errorf("the probed build inlines no call of %s", fn)
		}
	}
	checkProbes(t, bin, "stats", []string{"entry__main__counted", "entry__main__fast", "entry__main__fib", "entry__main__nap",
		"exit__main__fast", "exit__main__fib", "exit__main__nap"})

	t.Run("bpftrace", func(t *testing.T) {
		eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
			out := bpftrace(t, bt, fmt.Sprintf(`usdt:%[1]s:stats:entry__main__fast { @fast = count(); } usdt:%[1]s:stats:exit__main__fast { @fastexit = count(); } usdt:%[1]s:stats:entry__main__counted { @counted = count(); }`, bin), bin)
			for _, want := range []string{"@fast: 10000", "@fastexit: 10000", "@counted: 7"} {
				if !strings.Contains(out, want) {
					t.Errorf("bpftrace counted, want %s:\n%s", want, out)
				}
			}
		})
	})
	t.Run("trace", func(t *testing.T) {
		requireAMD64(t)
		eachTransport(t, func(t *testing.T, transport string) {
			out, errOut, err := usdtTrace(t, "-transport", transport, "-stats", "--", bin)
			if err != nil {
				t.Fatalf("trace: %v\n%s", err, errOut)
			}
			checkStats(t, parseStats(t, out), out)
		})
	})
}
