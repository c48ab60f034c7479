package e2e

import (
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/inlining"
	"github.com/go-usdt/usdt/internal/sdtnote"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// notesSrc has a function of each kind a note-only probe meets: two
// returns and a string that no one register holds (Add), a frameless
// leaf with a float (leaf), recursion (fib, whose every exit pairs with
// its own entry) and a function the compiler inlines (small), which
// keeps no copy of its own and so has no note-only probes.
const notesSrc = `package main

import "fmt"

type Tree struct{ n int }

//go:noinline
func (t *Tree) Add(k int, s string, ok bool) (int, bool) {
	if k < 0 {
		return 0, false
	}
	t.n += k
	return t.n, ok
}

//go:noinline
func leaf(a int8, b uint32, f float64, p *Tree) int64 {
	return int64(a) + int64(b) + int64(f) + int64(p.n)
}

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func small(x int) int { return x*2 + 1 }

func main() {
	t := &Tree{}
	sum := 0
	for i := range 1000 {
		n, _ := t.Add(i, "x", i%2 == 0)
		sum += n + int(leaf(-3, 7, 1.5, t)) + small(i)
	}
	fmt.Println(sum, fib(15))
}
`

const notesRules = "provider: notes\nrules:\n  - package: example.com/notes\n    sites: notes\n"

// notesMixedRules give leaf notes, and every other function code.
const notesMixedRules = "provider: notes\nrules:\n  - package: example.com/notes\n    func: leaf\n    sites: notes\n  - package: example.com/notes\n    exclude: [main]\n"

// notesCalls are the calls the program makes: fib(15) makes 1,973.
var notesCalls = map[string]int{"main.(*Tree).Add": 1000, "main.leaf": 1000, "main.fib": 1973, "main.main": 1}

// notesAddSums are what Add's entry probes pass as k, and its exit probes
// as its first result, summed over the calls.
func notesAddSums() (k, n int) {
	total := 0
	for i := range 1000 {
		total += i
		k, n = k+i, n+total
	}
	return k, n
}

// TestNotes builds notesSrc with sites: notes. The compiler makes the
// same inlining decisions as in the plain build, the program prints the
// same, and the notes point into the functions' own code with no
// semaphore, a note per return. bcc's tplist and perf list them,
// bpftrace counts every call and reads the arguments and results where
// Go's register ABI keeps them, gdb stops at a probe and reads its
// arguments, and usdt-toolexec trace prints the values, times each call
// from its entry event and counts every call.
func TestNotes(t *testing.T) {
	var bin string
	if guestDir != "" {
		bin = prebuilt(t, "main", "notes")
	} else {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/notes\n\ngo 1.24\n")
		writeFile(t, filepath.Join(dir, "main.go"), notesSrc)
		writeFile(t, filepath.Join(dir, "rules.yml"), notesRules)
		gcflags := "-gcflags=example.com/notes=-m=2"
		plainBin, probedBin := filepath.Join(dir, "plain"), filepath.Join(dir, "notes")
		plain := readInlining(t, goCmd(t, dir, buildEnv(), "build", "-a", gcflags, "-o", plainBin, "."))
		probed := readInlining(t, goCmd(t, dir, buildEnv(), "build", "-a", gcflags, "-o", probedBin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), "."))
		if lost := inlining.Lost(plain, probed); len(lost) > 0 {
			t.Errorf("the build with notes no longer inlines:\n%s", strings.Join(lost, "\n"))
		}
		// The generated file's init, which keeps the probe table, is new.
		gained := slices.DeleteFunc(inlining.Lost(probed, plain), func(l string) bool { return strings.Contains(l, "usdt_note_probes.go:") })
		if len(gained) > 0 {
			t.Errorf("the build with notes inlines more:\n%s", strings.Join(gained, "\n"))
		}
		want, err := exec.Command(plainBin).CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(probedBin).CombinedOutput()
		if err != nil || string(got) != string(want) {
			t.Errorf("with notes the program printed %q (%v), plain %q", got, err, want)
		}
		bin = probedBin
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := sdtnote.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A note per site: Add and fib return in two places each.
	sites := map[string]int{}
	for _, n := range notes {
		if n.Provider != "notes" {
			continue
		}
		if n.Semaphore != 0 {
			t.Errorf("%s:%s has a semaphore, %#x", n.Provider, n.Name, n.Semaphore)
		}
		sites[n.Name]++
	}
	want := map[string]int{"entry__main__Tree__Add": 1, "entry__main__fib": 1, "entry__main__leaf": 1, "entry__main__main": 1,
		"exit__main__Tree__Add": 2, "exit__main__fib": 2, "exit__main__leaf": 1, "exit__main__main": 1}
	if !maps.Equal(sites, want) {
		t.Errorf("notes per probe: %v, want %v", sites, want)
	}
	k, n := notesAddSums()

	t.Run("bpftrace", func(t *testing.T) {
		eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
			script := strings.ReplaceAll(`usdt:BIN:notes:entry__main__Tree__Add { @add = count(); @k = sum(arg2); @ok = sum(arg3); @g[arg0] = count(); }
usdt:BIN:notes:exit__main__Tree__Add { @addexit = count(); @n = sum(arg2); }
usdt:BIN:notes:entry__main__leaf { @leaf = count(); @leafargs[(int8)arg1, arg2] = count(); }
usdt:BIN:notes:exit__main__leaf { @leafexit = count(); }
usdt:BIN:notes:entry__main__fib { @fib = count(); }
usdt:BIN:notes:exit__main__fib { @fibexit = count(); }`, "BIN", bin)
			out := bpftrace(t, bt, script, bin)
			for _, want := range []string{"@add: 1000\n", "@addexit: 1000\n", "@ok: 500\n", "@leaf: 1000\n", "@leafexit: 1000\n",
				"@fib: 1973\n", "@fibexit: 1973\n", "@g[1]: 1000\n", "@leafargs[-3, 7]: 1000\n", fmt.Sprintf("@k: %d\n", k), fmt.Sprintf("@n: %d\n", n)} {
				if !strings.Contains(out, want) {
					t.Errorf("bpftrace printed no %q:\n%s", want, out)
				}
			}
		})
	})
	t.Run("bt", func(t *testing.T) {
		eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
			bt.RequireAttach(t)
			script, err := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "bt", bin).Output()
			if err != nil {
				t.Fatalf("usdt-toolexec bt: %v", err)
			}
			// Add returns twice, and has one pair of blocks.
			if n := strings.Count(string(script), ":exit__main__Tree__Add\n"); n != 1 {
				t.Errorf("the script has %d blocks for Add's exit:\n%s", n, script)
			}
			file := filepath.Join(t.TempDir(), "notes.bt")
			writeFile(t, file, string(script))
			out, err := bt.Output(90*time.Second, "", file, "-c", bin)
			if err != nil {
				t.Fatalf("%v\nscript:\n%s", err, script)
			}
			checkNoWarning(t, out)
			// Timed from its entry, not from arg1 (0): every one of the
			// 1,000 calls of leaf is in a bucket above [0] (µs; a fire on
			// a function's own instruction takes microseconds).
			m := regexp.MustCompile(`(?s)@us\[main\.leaf *\]:\s*\n(.*?)\n\n`).FindStringSubmatch(out + "\n\n")
			calls := 0
			if m != nil {
				for _, c := range regexp.MustCompile(`(?m)^\[[^\])]+[\])]\s+(\d+)`).FindAllStringSubmatch(m[1], -1) {
					n, _ := strconv.Atoi(c[1])
					calls += n
				}
			}
			if m == nil || calls != 1000 || strings.Contains(m[1], "[0]") {
				t.Errorf("leaf's histogram does not hold its 1,000 calls, each timed:\n%s", out)
			}
		})
	})
	// tplist and perf list the notes as the ELF file has them, the same
	// on every kernel: the host checks them.
	if guestDir == "" {
		t.Run("tplist", func(t *testing.T) { checkTplist(t, bin, "notes", slices.Collect(maps.Keys(want))) })
		t.Run("perf", func(t *testing.T) { checkPerfList(t, bin, "notes", slices.Collect(maps.Keys(want))) })
	}
	t.Run("gdb", func(t *testing.T) {
		tracetest.Require(t, "gdb")
		out, err := tracetest.Output(120*time.Second, nil, "gdb", "-batch", "-nx",
			"-ex", "set language c",
			"-ex", "break -probe-stap notes:entry__main__leaf",
			"-ex", "run",
			"-ex", "printf \"leaf %d %d goroutine %d\\n\", $_probe_arg1, $_probe_arg2, $_probe_arg0",
			"-ex", "kill",
			"--args", bin)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "leaf -3 7 goroutine 1\n") {
			t.Errorf("gdb did not print leaf's arguments:\n%s", out)
		}
	})
	t.Run("trace", func(t *testing.T) {
		requireBPF(t)
		out, errOut, err := usdtTrace(t, "--", bin)
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, errOut)
		}
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m) g=1 main\.\(\*Tree\)\.Add\(t=&\{n:0\}, k=0, ok=true; dropped: s\)$`),
			regexp.MustCompile(`(?m) g=1 main\.leaf\(a=-3, b=7, p=&\{n:\d+\}; dropped: f\)$`),
			// Each exit is timed from its entry: never 0s.
			regexp.MustCompile(`(?m) g=1 main\.fib = \(r1=610\) \d[\d.]*(µs|ms|s)$`),
		} {
			if !want.MatchString(out) {
				t.Errorf("trace printed no line matching %s:\n%.3000s", want, out)
			}
		}
		if regexp.MustCompile(`(?m) = .* 0s$`).MatchString(out) {
			t.Errorf("an exit was not timed:\n%.3000s", out)
		}
		out, errOut, err = usdtTrace(t, "-stats", "--", bin)
		if err != nil {
			t.Fatalf("trace -stats: %v\n%s", err, errOut)
		}
		got := map[string]int{}
		for _, fs := range parseStats(t, out) {
			got[fs.Function] = int(fs.Calls)
		}
		for fn, calls := range notesCalls {
			if got[fn] != calls {
				t.Errorf("trace -stats counted %d calls of %s, want %d:\n%s", got[fn], fn, calls, out)
			}
		}
	})
}

// TestNotesMixed builds notesSrc with leaf's sites notes and the other
// functions' code: the BPF transport traces both kinds, and the ring
// records the code probes and says it leaves the notes out. Without
// -transport, as root, trace takes the ring when it records every
// selected probe, and BPF when a note is among them.
func TestNotesMixed(t *testing.T) {
	requireBPF(t)
	bin := buildMainRules(t, target{}, "notes", notesSrc, notesMixedRules)
	code := []string{"main.fib", "main.(*Tree).Add"}
	for _, tt := range []struct {
		name, transport string
		patterns        []string
		want            map[string]int
		why             string // what -v says of the transport
	}{
		// small, which the compiler inlines, is probed in the code
		// rule, as rules do by default.
		{"bpf", "bpf", nil, map[string]int{"main.(*Tree).Add": 1000, "main.leaf": 1000, "main.fib": 1973, "main.small": 1000}, "transport bpf: as -transport bpf asks"},
		{"ring", "ring", nil, map[string]int{"main.(*Tree).Add": 1000, "main.fib": 1973, "main.small": 1000}, "transport ring: as -transport ring asks"},
		{"auto", "auto", nil, map[string]int{"main.(*Tree).Add": 1000, "main.leaf": 1000, "main.fib": 1973, "main.small": 1000}, "transport bpf: the ring does not record 2 selected probes"},
		{"auto code", "auto", code, map[string]int{"main.(*Tree).Add": 1000, "main.fib": 1973}, "transport ring: the binary has an in-process ring, which records every selected probe"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.transport != "bpf" {
				requireRing(t)
			}
			if tt.transport == "auto" && os.Geteuid() != 0 {
				t.Skip("what trace takes without -transport as root: not root")
			}
			args := append(append([]string{"-v", "-stats", "-transport", tt.transport}, tt.patterns...), "--", bin)
			out, errOut, err := usdtTrace(t, args...)
			if err != nil {
				t.Fatalf("trace: %v\n%s", err, errOut)
			}
			got := map[string]int{}
			for _, fs := range parseStats(t, out) {
				got[fs.Function] = int(fs.Calls)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("trace -stats counted %v, want %v:\n%s", got, tt.want, out)
			}
			if !strings.Contains(errOut, tt.why) {
				t.Errorf("-v does not say %q:\n%s", tt.why, errOut)
			}
			said := strings.Contains(errOut, "2 probes not traced: their sites are notes")
			if said != (tt.transport == "ring") {
				t.Errorf("-transport %s: stderr says the notes are not traced: %v\n%s", tt.transport, said, errOut)
			}
		})
	}
}
