package e2e

import (
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/funcsites"
)

// switchSrc has a function of each kind sites: switch copies: a method
// on a pointer and one on a value (both kept out of line), recursion
// (fib), a closure (sum), a function the compiler inlines everywhere
// (small, which neither build keeps), and main. done, whose rule says
// sites: code, is the control: its probes fire. maxOf, which done calls,
// is generic, and has its probes as code.
const switchSrc = `package main

import (
	"fmt"
	"os"
)

type Store struct{ m map[string]int }

//go:noinline
func (s *Store) Put(k string, v int) { s.m[k] = v }

//go:noinline
func (s Store) Get(k string) (int, bool) {
	v, ok := s.m[k]
	return v, ok
}

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

//go:noinline
func sum(xs ...int) (n int) {
	each := func(x int) { n += x * x }
	for _, x := range xs {
		each(x)
	}
	return n
}

func small(x int) int { return x*2 + 1 }

// maxOf is generic: it gets no copy, and is probed as sites: code
// probes it.
func maxOf[T int | float64](a, b T) T {
	if a > b {
		return a
	}
	return b
}

//go:noinline
func done(n int) { _ = maxOf(n, 0) }

func main() {
	s := &Store{m: map[string]int{}}
	for i := range 200 {
		s.Put(fmt.Sprint(i), fib(i%15)+small(i))
	}
	v, ok := s.Get("14")
	fmt.Println(v, ok, sum(1, 2, 3))
	done(v)
	os.Exit(3)
}
`

const switchRules = "provider: sw\nrules:\n  - package: example.com/switch\n    func: done\n  - package: example.com/switch\n    sites: switch\n"

// switched are the functions of switchSrc that sites: switch leaves as
// written, by their symbols, and their copies'.
var switched = map[string]string{
	"main.(*Store).Put": "main.(*Store).put_usdtTraced",
	"main.Store.Get":    "main.Store.get_usdtTraced",
	"main.fib":          "main.fib_usdtTraced",
	"main.sum":          "main.sum_usdtTraced",
	"main.main":         "main.main_usdtTraced",
}

// TestSwitch builds switchSrc plain and with a rule that says sites:
// switch: each function the rule selects but maxOf has the plain build's
// instructions, and its traced copy is in the executable (symbol table
// and .gopclntab) though nothing calls it; the program prints and exits
// as the plain one. Traced through the in-process ring, the program runs
// as well, and only the control's probes record: nothing switches a
// function to its copy yet, so the copies' probes, enabled, never fire.
func TestSwitch(t *testing.T) {
	if guestDir != "" {
		t.Skip("builds with the go command")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/switch\n\ngo 1.24\n")
	writeFile(t, filepath.Join(dir, "main.go"), switchSrc)
	writeFile(t, filepath.Join(dir, "rules.yml"), switchRules)
	plain, bin := filepath.Join(dir, "plain"), filepath.Join(dir, "switch")
	goCmd(t, dir, buildEnv(), "build", "-o", plain, ".")
	out := goCmd(t, dir, buildEnv(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	// Without -v, the build names the one function it could not copy.
	if n := strings.Count(out, "no traced copy"); n != 1 || !strings.Contains(out, "main.maxOf: no traced copy for sites: switch: it is generic") {
		t.Errorf("the build does not say, once, that maxOf has no traced copy:\n%s", out)
	}

	for fn := range switched {
		want, got := disassemble(t, dir, plain, fn), disassemble(t, dir, bin, fn)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s differs from the plain build's:\n%s\nplain:\n%s", fn, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// small is inlined into each caller, and then neither build keeps
	// it; its copy is there, to no use.
	for _, b := range []string{plain, bin} {
		if got := disassemble(t, dir, b, "main.small"); len(got) > 0 {
			t.Errorf("%s has main.small, which the compiler inlines", filepath.Base(b))
		}
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
	table, err := funcsites.GoTable(f)
	if err != nil || table == nil {
		t.Fatalf("no .gopclntab: %v", err)
	}
	copies := map[string]string{"main.small": "main.small_usdtTraced"}
	for fn, c := range switched {
		copies[fn] = c
	}
	for fn, c := range copies {
		// The pair the run-time switch will find by name.
		i := strings.LastIndex(fn, ".")
		if want := fn[:i+1] + autoprobe.TracedName(fn[i+1:], strings.Count(fn, ".") == 2, 0); c != want {
			t.Errorf("%s: copy %s, TracedName says %s", fn, c, want)
		}
		if !slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == c && elf.ST_TYPE(s.Info) == elf.STT_FUNC }) {
			t.Errorf("%s is not in the symbol table", c)
		}
		if table.LookupFunc(c) == nil {
			t.Errorf("%s is not in .gopclntab", c)
		}
	}

	want, wantErr := exec.Command(plain).CombinedOutput()
	got, err := exec.Command(bin).CombinedOutput()
	if string(got) != string(want) || exitCode(err) != exitCode(wantErr) || exitCode(err) != 3 {
		t.Errorf("the program printed %q and exited with %v, plain %q and %v", got, err, want, wantErr)
	}

	t.Run("ring", func(t *testing.T) {
		requireRing(t)
		stdout, stderr, err := usdtTrace(t, "-transport", "ring", "--", bin)
		if exitCode(err) != 3 || !strings.Contains(stderr, strings.TrimSpace(string(want))) {
			t.Errorf("trace: %v, want the program's exit status 3 and its output\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		// The control's two events, and none of the switched functions.
		if !regexp.MustCompile(`(?m) main\.done\(n=`).MatchString(stdout) || !strings.Contains(stdout, "main.done = ") {
			t.Errorf("trace recorded no call of main.done, the control:\n%s", stdout)
		}
		for fn := range switched {
			name := strings.NewReplacer("(*", "", ")", "").Replace(fn)
			if strings.Contains(stdout, " "+name+"(") || strings.Contains(stdout, " "+name+" =") {
				t.Errorf("trace recorded %s, which nothing switched to its copy:\n%s", fn, stdout)
			}
		}
	})
}

// disassemble returns the instructions of the function sym in bin, as go
// tool objdump prints them without addresses: a branch's target is its
// distance from the function's entry, and a PC-relative operand reads
// (IP) without its displacement.
func disassemble(t *testing.T, dir, bin, sym string) []string {
	t.Helper()
	out := goCmd(t, dir, nil, "tool", "objdump", "-s", "^"+regexp.QuoteMeta(sym)+"$", bin)
	var insts []string
	var entry uint64
	for _, line := range strings.Split(out, "\n") {
		// FILE:LINE, address, encoding, instruction.
		fields := strings.FieldsFunc(line, func(r rune) bool { return r == '\t' })
		if len(fields) < 4 || strings.HasPrefix(line, "TEXT ") {
			continue
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(fields[1]), "0x"), 16, 64)
		if err != nil {
			t.Fatalf("objdump line %q: %v", line, err)
		}
		if entry == 0 {
			entry = addr
		}
		inst := strings.TrimSpace(fields[3])
		inst = ipRelative.ReplaceAllString(inst, "(IP)")
		if m := branch.FindStringSubmatch(inst); m != nil {
			target, _ := strconv.ParseUint(m[2], 16, 64)
			inst = fmt.Sprintf("%s entry%+d", m[1], int64(target-entry))
		}
		insts = append(insts, inst)
	}
	return insts
}

var (
	ipRelative = regexp.MustCompile(`-?0x[0-9a-f]+\(IP\)`)
	branch     = regexp.MustCompile(`^(J[A-Z]+|CALL) 0x([0-9a-f]+)$`)
)
