package e2e

import (
	"bytes"
	"debug/elf"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/sdtnote"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// wantProbes is types.d as a tracer must see it: each probe's argument
// widths and signedness, in order.
var wantProbes = map[string][]string{
	"ints":   {"-1", "1", "-2", "2", "-4", "4"},
	"wide":   {"-8", "8", "8", "1", "1", "8"},
	"strs":   {"8", "8", "8", "8"},
	"chars":  {"-1", "-1", "1", "-8", "-8", "8"},
	"twelve": {"-4", "-4", "-4", "-4", "-4", "-4", "-4", "-4", "-4", "-4", "-4", "-4"},
	"tick":   nil,
}

var (
	routeA = route{name: "a-toolexec-nocgo", toolexec: true}
	routeB = route{name: "b-cgo", cgo: true}
	routeC = route{name: "c-toolexec-cgo", cgo: true, toolexec: true}
)

// routes is every supported way to build, with the flags people combine
// with them.
var routes = []route{
	routeA,
	{name: "a-pie", toolexec: true, flags: []string{"-buildmode=pie"}},
	{name: "a-stripped", toolexec: true, flags: []string{"-ldflags=-s -w"}},
	{name: "a-trimpath", toolexec: true, flags: []string{"-trimpath"}},
	routeB,
	{name: "b-pie", cgo: true, flags: []string{"-buildmode=pie"}},
	{name: "b-stripped", cgo: true, flags: []string{"-ldflags=-s -w"}},
	{name: "b-race", cgo: true, flags: []string{"-race"}},
	routeC,
	{name: "c-race", cgo: true, toolexec: true, flags: []string{"-race"}},
	{name: "c-pie", cgo: true, toolexec: true, flags: []string{"-buildmode=pie"}},
}

// argSpec matches one argument of a note; arm64 memory operands contain a
// space ("-4@[sp, 16]"), as GCC writes them.
var argSpec = regexp.MustCompile(`(-?\d+)@(\[[^\]]*\]|\S+)`)

// checkNotes asserts that bin carries every probe of types.d exactly once,
// with a base, a 2-aligned semaphore and the declared argument types.
func checkNotes(t *testing.T, bin string) []note {
	t.Helper()
	notes := readelfNotes(t, bin)
	seen := map[string]int{}
	for _, n := range notes {
		if n.provider != "types" {
			t.Errorf("unexpected provider %q (probe %s)", n.provider, n.name)
			continue
		}
		seen[n.name]++
		want, ok := wantProbes[n.name]
		if !ok {
			t.Errorf("unexpected probe types:%s", n.name)
			continue
		}
		for field, v := range map[string]string{"pc": n.pc, "base": n.base, "semaphore": n.semaphore} {
			if x, err := strconv.ParseUint(v, 0, 64); err != nil || x == 0 {
				t.Errorf("types:%s: %s is %q, want non-zero", n.name, field, v)
			}
		}
		if sem, _ := strconv.ParseUint(n.semaphore, 0, 64); sem%2 != 0 {
			t.Errorf("types:%s: semaphore %s not 2-aligned", n.name, n.semaphore)
		}
		var got []string
		for _, m := range argSpec.FindAllStringSubmatch(n.args, -1) {
			got = append(got, m[1])
		}
		if rest := strings.TrimSpace(argSpec.ReplaceAllString(n.args, "")); rest != "" {
			t.Errorf("types:%s: malformed arguments %q (left over %q)", n.name, n.args, rest)
		}
		if !slices.Equal(got, want) {
			t.Errorf("types:%s: argument sizes %v (%q), want %v", n.name, got, n.args, want)
		}
	}
	for name := range wantProbes {
		if seen[name] != 1 {
			t.Errorf("probe types:%s appears %d times, want once", name, seen[name])
		}
	}
	return notes
}

func checkBpftraceList(t *testing.T, bin string) {
	t.Helper()
	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		got := bpftraceList(t, bt, bin)
		for name := range wantProbes {
			if !slices.Contains(got, "types:"+name) {
				t.Errorf("bpftrace -l does not list types:%s: %q", name, got)
			}
		}
	})
}

func TestRoutes(t *testing.T) {
	dir := fixture(t, "types")
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			if slices.Contains(r.flags, "-race") && runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
				t.Skip("no race detector here")
			}
			bin := build(t, dir, r)
			checkNotes(t, bin)
			checkSiteNops(t, bin)
			checkBpftraceList(t, bin)
		})
	}
}

// TestNoToolexecWithoutCgoFails is route (d): Go's linker would drop the
// notes, so the build must fail and say how to fix it.
func TestNoToolexecWithoutCgoFails(t *testing.T) {
	dir := fixture(t, "types")
	out, err := goRun(dir, []string{"CGO_ENABLED=0"}, "build", "-o", filepath.Join(t.TempDir(), "bin"), ".")
	if err == nil {
		t.Fatalf("CGO_ENABLED=0 go build without -toolexec succeeded; it must fail\n%s", out)
	}
	if !strings.Contains(out, "usdtgen_probes_need__go_build_toolexec_usdt_toolexec__or__CGO_ENABLED_1") {
		t.Errorf("the error does not name the fix:\n%s", out)
	}
}

// TestWarmCache rebuilds from a warm cache, and from a cache filled by a
// build without the wrapper: the notes must be the same each time.
func TestWarmCache(t *testing.T) {
	dir := fixture(t, "types")
	cache := []string{"GOCACHE=" + t.TempDir()}
	for _, r := range []route{routeA, routeC} {
		t.Run(r.name, func(t *testing.T) {
			var first []byte
			for i := 0; i < 2; i++ {
				out := filepath.Join(t.TempDir(), "bin")
				goCmd(t, dir, append(cache, r.env()...), r.buildArgs(out)...)
				checkNotes(t, out)
				data, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = data
				} else if !slices.Equal(first, data) {
					t.Errorf("rebuild from a warm cache gave a different binary")
				}
			}
		})
	}
	t.Run("cache-from-plain-cgo-build", func(t *testing.T) {
		// Packages compiled by a plain cgo build are in the cache; a
		// toolexec build without cgo must not reuse the linked result.
		goCmd(t, dir, append(cache, routeB.env()...), routeB.buildArgs(filepath.Join(t.TempDir(), "bin"))...)
		out := filepath.Join(t.TempDir(), "bin")
		goCmd(t, dir, append(cache, routeA.env()...), routeA.buildArgs(out)...)
		checkNotes(t, out)
	})
}

// TestGoTestAndRun checks the binaries go test and go run link.
func TestGoTestAndRun(t *testing.T) {
	dir := fixture(t, "types")
	toolexec := "-toolexec=" + wrapperBin()
	for _, r := range []route{routeA, routeB, routeC} {
		t.Run(r.name+"/test", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "types.test")
			args := []string{"test", "-c", "-o", out}
			if r.toolexec {
				args = append(args, toolexec)
			}
			goCmd(t, dir, r.env(), append(args, ".")...)
			checkNotes(t, out)
			checkBpftraceList(t, out)
			args = []string{"test", "-count=1"}
			if r.toolexec {
				args = append(args, toolexec)
			}
			goCmd(t, dir, r.env(), append(args, ".")...)
		})
		t.Run(r.name+"/run", func(t *testing.T) {
			args := []string{"run"}
			if r.toolexec {
				args = append(args, toolexec)
			}
			out := goCmd(t, dir, r.env(), append(args, ".", "selfnotes")...)
			if !strings.Contains(out, "notes=6\n") {
				t.Errorf("go run binary does not carry the 6 probes:\n%s", out)
			}
		})
	}
}

// TestCrossArm64 builds for arm64 and reads the notes back, then lists
// programs built for amd64 and for arm64: each probe must show the same
// names and Go types on both, with specs that parse, and bt must write the
// same script for their automatic probes.
func TestCrossArm64(t *testing.T) {
	dir := fixture(t, "types")
	out := filepath.Join(t.TempDir(), "bin")
	goCmd(t, dir, []string{"CGO_ENABLED=0", "GOARCH=arm64"}, routeA.buildArgs(out)...)
	notes := checkNotes(t, out)
	for _, n := range notes {
		if n.name == "ints" && n.args != "-1@[sp, 8] 1@[sp, 9] -2@[sp, 10] 2@[sp, 12] -4@[sp, 16] 4@[sp, 20]" {
			t.Errorf("arm64 types:ints arguments %q", n.args)
		}
	}
	t.Run("b-cgo", func(t *testing.T) {
		// AAPCS64 passes eight arguments in registers and the rest on the
		// stack, from its bottom.
		out := filepath.Join(t.TempDir(), "bin")
		goCmd(t, dir, crossEnv(t, "arm64", routeB), routeB.buildArgs(out)...)
		for _, n := range checkNotes(t, out) {
			if n.name == "twelve" && n.args != "-4@x0 -4@x1 -4@x2 -4@x3 -4@x4 -4@x5 -4@x6 -4@x7 -4@[sp, 0] -4@[sp, 8] -4@[sp, 16] -4@[sp, 24]" {
				t.Errorf("arm64 types:twelve arguments %q", n.args)
			}
		}
	})
	for _, c := range crossListCases {
		t.Run("list/"+c.name, func(t *testing.T) {
			args, scripts := map[string]map[string]string{}, map[string]string{}
			for _, arch := range []string{"amd64", "arm64"} {
				bin := c.build(t, crossEnv(t, arch, c.route))
				var specs map[string]string
				args[arch], specs = listArgs(t, bin)
				checkListSpecs(t, arch, args[arch], specs)
				if c.rules != "" {
					out, err := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "bt", bin).Output()
					if err != nil {
						t.Fatalf("usdt-toolexec bt %s: %v", bin, err)
					}
					scripts[arch] = strings.ReplaceAll(string(out), bin, "BINARY")
				}
			}
			if scripts["amd64"] != scripts["arm64"] {
				t.Errorf("bt writes\n%s\nfor amd64 and\n%s\nfor arm64", scripts["amd64"], scripts["arm64"])
			}
			if len(args["amd64"]) == 0 {
				t.Fatal("list shows no probes")
			}
			if c.want != nil && !maps.Equal(args["arm64"], c.want) {
				t.Errorf("list shows\n%s\non arm64, want\n%s", showArgs(args["arm64"]), showArgs(c.want))
			}
			if !maps.Equal(args["amd64"], args["arm64"]) {
				t.Errorf("list shows\n%s\non amd64 and\n%s\non arm64", showArgs(args["amd64"]), showArgs(args["arm64"]))
			}
		})
	}
}

// crossEnv is the environment that builds route r for arch: with cgo, the
// C cross compiler for arch, or a skip when it is missing.
func crossEnv(t *testing.T, arch string, r route) []string {
	t.Helper()
	env := append(r.env(), "GOARCH="+arch)
	if !r.cgo {
		return env
	}
	cc := map[string]string{"amd64": "x86_64-linux-gnu-gcc", "arm64": "aarch64-linux-gnu-gcc"}[arch]
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler for %s (%v): scripts/setup.sh installs it", arch, err)
	}
	return append(env, "CC="+cc)
}

// checkListSpecs checks that each probe's SPEC column parses as one
// operand per listed argument, and on arm64 in a form libbpf accepts.
func checkListSpecs(t *testing.T, arch string, args, specs map[string]string) {
	t.Helper()
	for probe, spec := range specs {
		operands := sdtnote.SplitArgs(spec)
		for _, op := range operands {
			if m := argSpec.FindString(op); m != op {
				t.Errorf("%s %s: operand %q of %q does not parse", arch, probe, op, spec)
			}
		}
		listed, _, _ := strings.Cut(args[probe], ", dropped: ")
		if n := len(strings.Split(listed, ", ")); listed != "" && n != len(operands) {
			t.Errorf("%s %s: list shows %d arguments (%s) for the %d of %q", arch, probe, n, args[probe], len(operands), spec)
		}
		if arch == "arm64" {
			if err := checkLibbpfARM64(spec); err != nil {
				t.Errorf("arm64 %s: %q: %v", probe, spec, err)
			}
		}
	}
}

func showArgs(args map[string]string) string {
	var lines []string
	for _, p := range slices.Sorted(maps.Keys(args)) {
		lines = append(lines, "\t"+p+": "+args[p])
	}
	return strings.Join(lines, "\n")
}

// siteNop is what every probe site must hold: on amd64 the 1-byte NOP,
// which every kernel emulates, then the 5-byte NOP, which Linux 6.18
// optimizes into a call instead of a trap.
var siteNop = map[elf.Machine][]byte{
	elf.EM_X86_64:  nopPair,
	elf.EM_AARCH64: {0x1f, 0x20, 0x03, 0xd5},
}

// checkSiteNops asserts that each note of bin points at siteNop in the
// file, the address adjusted by .stapsdt.base as consumers adjust it.
func checkSiteNops(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	notes, err := sdtnote.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) == 0 {
		t.Fatalf("%s has no notes", bin)
	}
	base := f.Section(".stapsdt.base")
	if base == nil {
		t.Fatalf("%s has no .stapsdt.base", bin)
	}
	want := siteNop[f.Machine]
	for _, n := range notes {
		pc := n.PC + base.Addr - n.Base
		got := make([]byte, len(want))
		read := false
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && pc >= p.Vaddr && pc+uint64(len(got)) <= p.Vaddr+p.Filesz {
				if _, err := p.ReadAt(got, int64(pc-p.Vaddr)); err != nil {
					t.Fatal(err)
				}
				read = true
				break
			}
		}
		if !read {
			t.Errorf("%s:%s: site %#x is in no loaded segment", n.Provider, n.Name, pc)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s:%s: site %#x holds % x, want % x", n.Provider, n.Name, pc, got, want)
		}
	}
}
