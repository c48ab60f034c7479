package benchauto

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/testing/wrapperid"
)

// TestBuilds checks what the benchmarks rely on, in the builds that
// scripts/bench-auto.sh makes: rules.yml gives entry and exit probes to
// Work and Add and to nothing else (not to the benchmarks, the loops or
// the references), and Add stays inlinable in every build: an
// instrumented tiny function keeps its body behind one branch and calls
// its traced copy only while traced.
func TestBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds this package three times")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("automatic probes are not supported on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command: %v", err)
	}
	// The wrapper's identity, in every cache key of the builds it wraps,
	// is that of its instrumenting code: a change to the tracer alone
	// leaves the builds with each rules file, the standard library's
	// included, cached. It is computed in goCmd's environment, the
	// wrapper's build's.
	id, err := wrapperid.LDFlag("../../..", append(os.Environ(), "CGO_ENABLED=0"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	toolexec := filepath.Join(dir, "usdt-toolexec")
	goCmd(t, "build", id, "-o", toolexec, "../../../cmd/usdt-toolexec")
	for _, c := range []struct {
		name, rules string
		probes      []string
	}{
		{"plain", "", nil},
		{"auto", "rules.yml", []string{"entry__benchauto__Add", "entry__benchauto__Work", "exit__benchauto__Add", "exit__benchauto__Work"}},
		{"entry", "rules-entry.yml", []string{"entry__benchauto__Add", "entry__benchauto__Work"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := filepath.Join(dir, c.name+".test")
			args := []string{"test", "-c", "-o", bin, "-gcflags=-m=2"}
			if c.rules != "" {
				abs, err := filepath.Abs(c.rules)
				if err != nil {
					t.Fatal(err)
				}
				args = append(args, "-toolexec="+toolexec+" -rules "+abs)
			}
			out := goCmd(t, append(args, ".")...)
			canInline := regexp.MustCompile(`benchauto\.go:\d+:\d+: can inline Add with`).MatchString(out)
			if !canInline {
				t.Errorf("Add is not inlinable; -gcflags=-m=2 says:\n%s", grepLines(out, " Add"))
			}
			listed, _ := exec.Command(toolexec, "list", bin).CombinedOutput()
			var got []string
			for _, l := range strings.Split(string(listed), "\n")[1:] {
				if f := strings.Fields(l); len(f) >= 2 {
					got = append(got, f[1])
				}
			}
			if c.probes == nil {
				if strings.Contains(string(listed), "__") {
					t.Errorf("the plain build has probes:\n%s", listed)
				}
				return
			}
			slices.Sort(got)
			if !slices.Equal(got, c.probes) {
				t.Errorf("probes %v, want %v; usdt-toolexec list says:\n%s", got, c.probes, listed)
			}
		})
	}
}

func grepLines(s, substr string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// goCmd runs the go command in this directory, with CGO_ENABLED=0 (the
// route the benchmarks use), and returns its combined output.
func goCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
