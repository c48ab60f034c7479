package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// scaleFuncs is how many functions TestTraceScale instruments: with an
// entry and an exit probe each, 10,000 probes.
const scaleFuncs = 5000

// TestTraceScale has usdt-toolexec trace attach to every probe of a binary
// with 10,000 of them and print the events of one call. The bound is the
// harness's generous one: the speed goal (every probe of a 26,000-probe
// binary in 2 s) is scripts/bench-scale.sh's.
func TestTraceScale(t *testing.T) {
	requireAMD64(t)
	requireBPF(t)
	// Every function stays in the binary through the table; the program
	// calls only the one its argument count picks, f0 without arguments.
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n")
	for i := range scaleFuncs {
		fmt.Fprintf(&src, "func f%d(a int) int { return a + %d }\n", i, i)
	}
	src.WriteString("\nvar fs = [...]func(int) int{\n")
	for i := range scaleFuncs {
		fmt.Fprintf(&src, "\tf%d,\n", i)
	}
	src.WriteString("}\n\nfunc main() {\n\tfmt.Println(fs[len(os.Args)-1](41))\n}\n")
	bin := buildMain(t, "scale", src.String())

	// The reference count is readelf's, not the tracer's.
	if n := len(readelfNotes(t, bin)); n != 2*scaleFuncs {
		t.Fatalf("readelf -n shows %d probes, want %d", n, 2*scaleFuncs)
	}
	out, errOut, err := usdtTrace(t, "-v", "--", bin)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	how := regexp.MustCompile(fmt.Sprintf(`attached %d probes of \S+ with (one uprobe_multi link|one uprobe per site( \(.*\))?) in \S+`, 2*scaleFuncs)).FindString(errOut)
	if how == "" {
		t.Errorf("-v does not say how and how fast it attached:\n%s", errOut)
	}
	t.Log(how)
	if !strings.Contains(errOut, "\n41\n") && !strings.HasPrefix(errOut, "41\n") {
		t.Errorf("the program's output is missing:\n%s", errOut)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{6} `).ReplaceAllString(line, ""))
	}
	elapsed := regexp.MustCompile(` [0-9.]+(ns|µs|ms|s)$`)
	if len(got) != 2 || !regexp.MustCompile(`^g=\d+ main\.f0\(a=41\)$`).MatchString(got[0]) ||
		!regexp.MustCompile(`^g=\d+ main\.f0 = \(r1=41\)$`).MatchString(elapsed.ReplaceAllString(got[1], "")) {
		t.Errorf("trace printed\n%s\nwant main.f0's entry (a=41) and exit (r1=41)", out)
	}
}

// buildMain builds the main package src as module example.com/name with
// an entry and an exit probe in every function but main, of provider name.
func buildMain(t *testing.T, name, src string) string {
	t.Helper()
	return buildMainFor(t, target{}, name, src)
}

// buildMainFor builds a program of package main whose functions but main
// have probes, those the compiler inlines too, for tg.
func buildMainFor(t *testing.T, tg target, name, src string) string {
	t.Helper()
	return buildMainRules(t, tg, name, src, fmt.Sprintf("provider: %s\nrules:\n  - package: example.com/%s\n    exclude: [main]\n    inline: probe\n", name, name))
}

// buildMainRules builds the main package src as module example.com/name
// with the rules file rules, for tg; in guest mode it takes the one the
// host built.
func buildMainRules(t *testing.T, tg target, name, src, rules string) string {
	t.Helper()
	if guestDir != "" {
		return prebuilt(t, "main", name)
	}
	return memoBuild(t, strings.Join([]string{"main", tg.goarch, name, src, rules}, "\x00"), func() string {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/"+name+"\n\ngo 1.24\n")
		writeFile(t, filepath.Join(dir, "main.go"), src)
		writeFile(t, filepath.Join(dir, "rules.yml"), rules)
		bin := filepath.Join(t.TempDir(), name)
		goCmd(t, dir, append(buildEnv(), tg.env()...), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
		return bin
	})
}
