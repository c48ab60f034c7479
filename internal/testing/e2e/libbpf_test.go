package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// libbpfConsumer is testdata/libbpf built with the host's clang against
// the libbpf-dev of bt's system: a loader and the BPF objects for the types
// fixture, for the automatic probes of testdata/auto and for those of
// notesSrc, whose sites are notes. The loader links
// the host's libbpf.so.1 and runs with the chroot's just as well; the BPF
// side's usdt.bpf.h must come from the libbpf that fills its maps.
type libbpfConsumer struct{ loader, types, auto, notes string }

// For a VM's architecture (tg), the target's root is bt's system: the
// headers come from it and the loader is cross-linked against its libbpf.
func buildLibbpfConsumer(t *testing.T, bt tracetest.Bpftrace, dir string, tg target) libbpfConsumer {
	t.Helper()
	if guestDir != "" {
		dir = filepath.Join(guestDir, "libbpf")
	}
	c := libbpfConsumer{filepath.Join(dir, "usdtload"), filepath.Join(dir, "types.bpf.o"), filepath.Join(dir, "auto.bpf.o"), filepath.Join(dir, "notes.bpf.o")}
	if guestDir != "" {
		prebuilt(t, "libbpf", "usdtload")
		return c
	}
	tracetest.Require(t, "clang")
	root := bt.Root()
	if tg.root != "" {
		root = tg.root
	}
	inc := filepath.Join(root, "usr", "include")
	if _, err := os.Stat(filepath.Join(inc, "bpf", "usdt.bpf.h")); err != nil {
		tracetest.SkipMissing(t, "libbpf's usdt.bpf.h is missing (Debian: apt-get install libbpf-dev, which scripts/setup.sh, scripts/sid-chroot.sh and scripts/vm-images.sh install): %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("testdata", "libbpf")
	// No vmlinux.h: the USDT programs need only the UAPI pt_regs.
	bpf := []string{"-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_" + tg.bpfArch(), "-I", inc, "-I", filepath.Join(inc, tg.triple()), "-c", filepath.Join(src, "probes.bpf.c")}
	for _, args := range [][]string{
		append(bpf, "-DTYPES", "-o", c.types),
		append(bpf, "-o", c.auto),
		append(bpf, "-DNOTES", "-o", c.notes),
		append(tg.cflags(), "-O2", "-Wall", "-Werror", "-o", c.loader, filepath.Join(src, "loader.c"), "-lbpf"),
	} {
		if out, err := tracetest.Output(2*time.Minute, nil, "clang", args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	return c
}

// TestLibbpf reads every argument of the types fixture on both build
// routes, and an automatic probe's, with libbpf's USDT support
// (SEC("usdt"), BPF_USDT): libbpf 1.1 on the host and 1.7 in the sid
// chroot, running the same loader. It parses the argument specs itself, so
// this proves they pass its parser too.
func TestLibbpf(t *testing.T) {
	requireAMD64(t)
	// Built once per libbpf, kept until the end of the test.
	consumers, tmp := map[string]libbpfConsumer{}, t.TempDir()
	consumer := func(t *testing.T, bt tracetest.Bpftrace) libbpfConsumer {
		t.Helper()
		bt.RequireAttach(t)
		c, ok := consumers[bt.Name]
		if !ok {
			c = buildLibbpfConsumer(t, bt, filepath.Join(tmp, bt.Name), target{})
			consumers[bt.Name] = c
		}
		return c
	}
	dir := fixture(t, "types")
	for _, r := range guestRoutes(routeA, routeB) {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
				c := consumer(t, bt)
				out, err := bt.Exec(90*time.Second, c.loader, c.types, "types", bin, "fire")
				skipRefusedUSDT(t, out)
				if err != nil {
					t.Fatal(err)
				}
				m := ptrLine.FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("the program did not print its pointer:\n%s", out)
				}
				checkValues(t, 260, out, m[1])
				for _, want := range []string{"twelve 6 -7 8 -9 10 -11\n", "usdtload: 5 of 5 programs fired\n"} {
					if !strings.Contains(out, want) {
						t.Errorf("libbpf did not print %q:\n%s", want, out)
					}
				}
			})
		})
	}
	t.Run("auto", func(t *testing.T) {
		a := &auto{dir: userModule(t, "auto", "example.com/auto"), out: t.TempDir(), memo: map[string]memoized{}, buildOutput: map[string]string{}}
		a.rules = filepath.Join(a.dir, "rules.yml")
		bin := a.bin(t, "inst")
		eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
			c := consumer(t, bt)
			out, err := bt.Exec(90*time.Second, c.loader, "-w", c.auto, "shop", bin, "demo")
			skipRefusedUSDT(t, out)
			if err != nil {
				t.Fatal(err)
			}
			store := autoStoreLine.FindStringSubmatch(out)
			if store == nil {
				t.Fatalf("auto demo did not print its store and goroutine id:\n%s", out)
			}
			rep := strings.NewReplacer("g=G", "g="+store[2], "STORE", store[1])
			for _, w := range autoDemoWant {
				if w = rep.Replace(w); strings.HasPrefix(w, "P entry Place ") && !strings.Contains(out, w+"\n") {
					t.Errorf("libbpf did not print %q:\n%s", w, out)
				}
			}
		})
	})
	t.Run("notes", func(t *testing.T) {
		var bin string
		if guestDir != "" {
			bin = prebuilt(t, "main", "notes")
		} else {
			bin = buildMainRules(t, target{}, "notes", notesSrc, notesRules)
		}
		k, n := notesAddSums()
		eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
			c := consumer(t, bt)
			out, err := bt.Exec(90*time.Second, c.loader, "-w", c.notes, "notes", bin)
			skipRefusedUSDT(t, out)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("notes g=1 leaf=1000 add=1000 addexit=1000 k=%d n=%d elapsed=0\n", k, n)
			if !strings.Contains(out, want) {
				t.Errorf("libbpf did not print %q:\n%s", want, out)
			}
		})
	})
}

// skipRefusedUSDT skips the test when the kernel's verifier refused
// libbpf's own USDT code: bpf_usdt_arg (usdt.bpf.h) is a global BPF
// function taking a long *, which some kernels verify as a global function
// and refuse ("Unrecognized arg#2 type PTR"), at load, before any probe is
// attached: no USDT program of libbpf 1.1 loads there, a C program's
// included. Measured: Debian 11's 5.10.0-32 and Debian 12's 6.1.0-50
// refuse it, 6.1.0-56 and 6.18 load it.
func skipRefusedUSDT(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "BPF program load failed") && strings.Contains(out, "Unrecognized arg#2 type PTR") {
		t.Skipf("this kernel's verifier refuses libbpf's bpf_usdt_arg (a global function taking a pointer) at load, for every USDT program: %s", kernelRelease())
	}
}

// libbpfARM64Arg matches one argument in a form libbpf's arm64 USDT parser
// accepts (parse_usdt_arg in src/usdt.c, read in v1.1.2 and v1.7.0): a
// size, @, then [REG, OFF], [REG], a constant or REG. 1.1 wants the comma
// right after the register (1.7 also allows spaces before it); both skip
// any other blanks. Written from those rules, not from libbpf's code.
var libbpfARM64Arg = regexp.MustCompile(`^\s*(-?\d+)\s*@\s*(?:\[\s*([a-z0-9]{1,15}),\s*-?\d+\s*\]|\[\s*([a-z0-9]{1,15})\s*\]|-?\d+|([a-z0-9]{1,15}))\s*`)

// libbpfARM64Reg is a register libbpf maps to pt_regs on arm64: x0 to x30
// and sp. The 32-bit names (w0) are refused.
var libbpfARM64Reg = regexp.MustCompile(`^(x([0-9]|[12][0-9]|30)|sp)$`)

// checkLibbpfARM64 reports why libbpf on arm64 would refuse a note's
// argument string, or nil.
func checkLibbpfARM64(args string) error {
	for n := 0; args != ""; n++ {
		if n == 12 {
			return fmt.Errorf("more than 12 arguments")
		}
		m := libbpfARM64Arg.FindStringSubmatch(args)
		if m == nil {
			return fmt.Errorf("argument %d: %q is no form libbpf accepts", n, args)
		}
		if size := strings.TrimPrefix(m[1], "-"); size != "1" && size != "2" && size != "4" && size != "8" {
			return fmt.Errorf("argument %d: size %s", n, m[1])
		}
		for _, reg := range m[2:] {
			if reg != "" && !libbpfARM64Reg.MatchString(reg) {
				return fmt.Errorf("argument %d: register %q", n, reg)
			}
		}
		args = args[len(m[0]):]
	}
	return nil
}

func TestCheckLibbpfARM64(t *testing.T) {
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		// The examples in libbpf's comments.
		{"-4@[sp, 96]", true},
		{"-4@[sp]", true},
		{"4@5", true},
		{"-8@x4", true},
		{"-1@x0 2@x1 -4@x2 8@x3 1@x4 8@x5 -8@x6 8@x7 -4@[sp, 0] 1@[sp, 8]", true},
		{" 8 @ [ x29, -16 ]  8@x30 ", true},
		{"", true},
		{"-4@w0", false},      // 32-bit register name
		{"8@[x1, x2]", false}, // indexed
		{"8@x31", false},      // no such register
		{"3@x0", false},       // size
		{"8@[sp , 8]", false}, // libbpf 1.1's comma
		{"8@%rdi", false},     // x86
		{"8@[sp, #8]", false}, // that is the arm32 syntax
		{strings.Repeat("8@x0 ", 13), false},
	} {
		if err := checkLibbpfARM64(tc.args); (err == nil) != tc.ok {
			t.Errorf("checkLibbpfARM64(%q) = %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}

// asciz matches a string of a GNU assembler file.
var asciz = regexp.MustCompile(`(?m)^\s*\.asciz "([^"]*)"$`)

// TestLibbpfARM64 checks every argument string the arm64 builds carry
// against libbpf's arm64 forms: the notes of the types fixture and of the
// automatic probes cross-built on route (a), and the strings of the GNU
// assembler files route (b) compiles, even without an arm64 C compiler to
// link them (TestCrossArm64 checks the linked ones when there is one).
func TestLibbpfARM64(t *testing.T) {
	check := func(what, args string) {
		t.Helper()
		if err := checkLibbpfARM64(args); err != nil {
			t.Errorf("%s: %q: %v", what, args, err)
		}
	}
	dir := fixture(t, "types")
	bin := filepath.Join(t.TempDir(), "types")
	goCmd(t, dir, []string{"CGO_ENABLED=0", "GOARCH=arm64"}, routeA.buildArgs(bin)...)
	notes := readelfNotes(t, bin)
	autoDir, autoBin := userModule(t, "auto", "example.com/auto"), filepath.Join(t.TempDir(), "auto")
	goCmd(t, autoDir, []string{"CGO_ENABLED=0", "GOARCH=arm64"}, "build", "-o", autoBin, usdtToolexec("-rules", filepath.Join(autoDir, "rules.yml")), ".")
	notes = append(notes, readelfNotes(t, autoBin)...)
	if len(notes) < 6+49 {
		t.Fatalf("%d notes, want the types fixture's 6 and the auto fixture's 49", len(notes))
	}
	for _, n := range notes {
		check(n.provider+":"+n.name, n.args)
	}
	s, err := os.ReadFile(filepath.Join(dir, "types_usdt_cgo_arm64.S"))
	if err != nil {
		t.Fatal(err)
	}
	specs := 0
	for _, m := range asciz.FindAllStringSubmatch(string(s), -1) {
		if strings.Contains(m[1], "@") {
			specs++
			check("types_usdt_cgo_arm64.S", m[1])
		}
	}
	if specs != 5 {
		t.Errorf("types_usdt_cgo_arm64.S has %d argument strings, want 5 (tick has none)", specs)
	}
}
