package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// btFuncs is how many functions TestBtManyFunctions instruments: more than
// bpftrace's default limit of 512 probes.
const btFuncs = 520

// btName is the i'th function of the fixture: names of every length from
// 2 to 52 characters, so that labels differ in length.
func btName(i int) string {
	return fmt.Sprintf("f%d%s", i, strings.Repeat("x", i%50))
}

// TestBtManyFunctions runs the script usdt-toolexec bt writes for a binary
// with many instrumented functions under bpftrace: all of them draw the
// limit warnings, 333 of them the warning of libbpf's 256 (which bpftrace
// 0.27 proves), and a pattern-narrowed script over more than 100 labels of
// many lengths in one map loads and gives each function its histogram.
func TestBtManyFunctions(t *testing.T) {
	var src strings.Builder
	src.WriteString("package main\n\nimport \"fmt\"\n\n")
	for i := range btFuncs {
		fmt.Fprintf(&src, "func %s(a int) int { return a + %d }\n\n", btName(i), i)
	}
	src.WriteString("func main() {\n\tsum := 0\n")
	for i := range btFuncs {
		fmt.Fprintf(&src, "\tsum = %s(sum)\n", btName(i))
	}
	src.WriteString("\tfmt.Println(\"sum\", sum)\n}\n")
	bin := buildMain(t, "many", src.String())

	bt := func(patterns ...string) (script, stderr string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), append([]string{"bt", bin}, patterns...)...)
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("usdt-toolexec bt: %v\n%s", err, errb.String())
		}
		return string(out), errb.String()
	}
	script, stderr := bt()
	env := fmt.Sprintf("BPFTRACE_MAX_PROBES=%d BPFTRACE_MAX_BPF_PROGS=%d", btFuncs, btFuncs)
	if !strings.Contains(stderr, env) || !strings.Contains(script, "// usage: "+env+" bpftrace") {
		t.Errorf("a script of %d probes does not say to set %s:\nstderr: %s\nscript header: %.300s", btFuncs, env, stderr, script)
	}
	checkLibbpfWarning(t, btFuncs, script, stderr)
	// main.f1* to main.f3*: 333 probes, within bpftrace's default limit
	// but past libbpf's.
	script, stderr = bt("main.f[1-3]*")
	if strings.Contains(stderr, "BPFTRACE_MAX") || strings.Contains(script, "BPFTRACE_MAX") {
		t.Errorf("a script of 333 probes says to raise bpftrace's limit of 512:\nstderr: %s\nscript header: %.300s", stderr, script)
	}
	checkLibbpfWarning(t, 333, script, stderr)
	past256 := filepath.Join(t.TempDir(), "past256.bt")
	writeFile(t, past256, script)

	// main.f1*, main.f9* and the exit probes of f20 to f29: without
	// padding, these labels make bpftrace 0.17 fail to load the script
	// ("misaligned stack access").
	var want []string
	for i := range btFuncs {
		if s := fmt.Sprint(i); s[0] == '1' || s[0] == '9' || len(s) == 2 && s[0] == '2' {
			want = append(want, "main."+btName(i))
		}
	}
	script, stderr = bt("main.f1*", "main.f9*", "exit__main__f2[0-9]x*")
	if stderr != "" {
		t.Errorf("bt over %d functions warns: %s", len(want), stderr)
	}
	if n := strings.Count(script, "usdt:"); n != len(want) {
		t.Errorf("the narrowed script has %d probes, want %d", n, len(want))
	}
	file := filepath.Join(t.TempDir(), "many.bt")
	writeFile(t, file, script)
	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		bt.RequireAttach(t)
		out, err := bt.Output(3*time.Minute, "", file, "-c", bin)
		if err != nil {
			t.Fatalf("%v\nscript:\n%.2000s", err, script)
		}
		checkNoWarning(t, out)
		// One call each, well under a millisecond. bpftrace 0.17 ends a
		// map's key line with a space, 0.27 doesn't.
		for _, label := range want {
			if !regexp.MustCompile(`(?m)^@us\[` + regexp.QuoteMeta(label) + ` *\]: ?\n\[\d+(, \d+\))?\]?\s+1 \|`).MatchString(out) {
				t.Errorf("no histogram of one call for %s", label)
			}
		}
		if t.Failed() {
			t.Logf("bpftrace output:\n%s", out)
		}
		// What the warning says, measured: bpftrace 0.27 (libbpf's USDT
		// support) attaches no script of more than 256 probes; 0.17 (bcc's)
		// takes minutes over 333 probes.
		if bt.Name == "sid" {
			out, err := bt.Output(3*time.Minute, "", past256, "-c", bin)
			if err == nil || !strings.Contains(out, "Argument list too long") {
				t.Errorf("bpftrace %s on a script of 333 probes: %v, want Argument list too long:\n%.2000s", bt.Name, err, out)
			}
		}
	})
}

// checkLibbpfWarning checks that a bt script of n probes, more than 256,
// warns in its header and on stderr that bpftrace built on libbpf's USDT
// support attaches no more, and points to usdt-toolexec trace.
func checkLibbpfWarning(t *testing.T, n int, script, stderr string) {
	t.Helper()
	if c := strings.Count(script, "usdt:"); c != n {
		t.Fatalf("the script has %d probes, want %d", c, n)
	}
	header, _, _ := strings.Cut(script, "\nusdt:")
	for _, out := range []string{header, stderr} {
		for _, want := range []string{fmt.Sprint(n, " probes"), "at most 256 USDT probes per script", "Argument list too long", "usdt-toolexec trace"} {
			if !strings.Contains(out, want) {
				t.Errorf("a script of %d probes does not warn %q:\nstderr: %s\nscript header: %s", n, want, stderr, header)
			}
		}
	}
}
