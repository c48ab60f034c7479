package e2e

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/funcsites"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/switchplan"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// switchSrc has a function of each kind sites: switch copies: a method
// on a pointer and one on a value (both kept out of line), recursion
// (fib), a closure (sum), a function the compiler inlines everywhere
// (small, which neither build keeps), and main. done, whose rule says
// sites: code, is the control: its probes fire. maxOf, which done calls,
// is generic, and has its probes as code.
const switchSrc = `package main

import (
	"bufio"
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
	if len(os.Args) > 1 && os.Args[1] == "-wait" {
		// A line in, fib(10) out, until the input ends.
		fmt.Println("ready")
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			fmt.Println(fib(10))
		}
		return
	}
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
	"main.(*Store).Put": "main.(*Store).usdtSwitched_Put",
	"main.Store.Get":    "main.Store.usdtSwitched_Get",
	"main.fib":          "main.usdtSwitched_fib",
	"main.sum":          "main.usdtSwitched_sum",
	"main.main":         "main.usdtSwitched_main",
}

// TestSwitch builds switchSrc plain and with a rule that says sites:
// switch: each function the rule selects but maxOf has the plain build's
// instructions, and its traced copy is in the executable (symbol table
// and .gopclntab) though nothing calls it; the program prints and exits
// as the plain one. trace switches the functions it traces
// (TestTraceSwitches), usdt-toolexec switch those it names
// (TestSwitchCommand).
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
	copies := map[string]string{"main.small": "main.usdtSwitched_small"}
	for fn, c := range switched {
		copies[fn] = c
	}
	for fn, c := range copies {
		// The pair the run-time switch finds by name.
		i := strings.LastIndex(fn, ".")
		if want := fn[:i+1] + autoprobe.SwitchName(fn[i+1:]); c != want {
			t.Errorf("%s: copy %s, SwitchName says %s", fn, c, want)
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
	if string(want) != switchOutput {
		t.Errorf("the plain build printed %q, want %q", want, switchOutput)
	}
	if string(got) != string(want) || exitCode(err) != exitCode(wantErr) || exitCode(err) != 3 {
		t.Errorf("the program printed %q and exited with %v, plain %q and %v", got, err, want, wantErr)
	}
}

// switchedBySwitch are the functions of switchSrc that usdt-toolexec
// switch switches: sum, whose closure the compiler inlines, is
// frameless. On amd64 it has no stack check to switch through; on
// arm64 a switch would write its first instruction, where its entry
// note is, and a uprobe's removal would undo it.
var switchedBySwitch = map[string]bool{"main.(*Store).Put": true, "main.Store.Get": true, "main.fib": true, "main.main": true}

// startSwitchFib starts usdt-toolexec switch -p on main.fib of process
// pid, and returns it with its stderr to read.
func startSwitchFib(t *testing.T, tool string, pid int) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	sw := exec.Command(tool, "switch", "-p", strconv.Itoa(pid), "main.fib")
	swErr, err := sw.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Process.Kill(); sw.Wait() })
	return sw, bufio.NewReader(swErr)
}

// startFib starts switchSrc waiting for lines, and returns it, its input
// and a call that has it compute fib(10).
func startFib(t *testing.T, bin string) (*exec.Cmd, io.WriteCloser, func()) {
	prog, stdin, lines := startReady(t, bin, "-wait")
	return prog, stdin, func() {
		t.Helper()
		fmt.Fprintln(stdin)
		if l, err := lines.ReadString('\n'); l != "55\n" {
			t.Fatalf("the program said %q (%v)", l, err)
		}
	}
}

// fibCalls is how many calls fib(n) makes, itself included.
func fibCalls(n int) int {
	if n < 2 {
		return 1
	}
	return 1 + fibCalls(n-1) + fibCalls(n-2)
}

// switchOutput is what switchSrc prints: Get("14") is fib(14) + small(14),
// 377 + 29, and sum(1, 2, 3) is 1 + 4 + 9. TestSwitch checks that the
// plain build prints it too.
const switchOutput = "406 true 14\n"

// TestSwitchCommand runs switchSrc, built with sites: switch, under
// usdt-toolexec switch: the command in its place (its output and exit
// status), and a running process (-p), with bpftrace counting the calls
// of the switched functions by their copies' notes: each call once while
// they are switched, none before or after. It runs in the arm64 guest of
// TestKernels too, where the switch is a B at the entry.
func TestSwitchCommand(t *testing.T) {
	bin := buildMainRules(t, target{}, "switch", switchSrc, switchRules)
	want := switchOutput
	tool := filepath.Join(toolsDir, "usdt-toolexec")
	t.Run("list -switch", func(t *testing.T) {
		out, err := exec.Command(tool, "list", "-switch", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("list -switch: %v\n%s", err, out)
		}
		// A line per function with a copy in the executable: small's
		// plain function is not there.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1+len(switched) {
			t.Errorf("list -switch printed %d lines, want a header and %d:\n%s", len(lines), len(switched), out)
		}
		for fn, c := range switched {
			want := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(fn) + ` +` + regexp.QuoteMeta(c) + ` +(yes|no: .+)$`).FindStringSubmatch(string(out))
			if want == nil || (want[1] == "yes") != switchedBySwitch[fn] {
				t.Errorf("list -switch on %s:\n%s", fn, out)
			}
		}
	})
	t.Run("-- CMD", func(t *testing.T) {
		cmd := exec.Command(tool, "switch", "-v", "main.*", "--", bin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if stdout.String() != want || exitCode(err) != 3 {
			t.Errorf("switch -- %s: printed %q and exited with %v, want %q and 3\nstderr:\n%s", bin, stdout.String(), err, want, stderr.String())
		}
		for fn := range switched {
			said := strings.Contains(stderr.String(), fmt.Sprintf("usdt-toolexec switch: %s switched to %s\n", fn, switched[fn]))
			stays := strings.Contains(stderr.String(), "usdt-toolexec switch: "+fn+" stays as compiled: ")
			if said != switchedBySwitch[fn] || said == stays {
				t.Errorf("switch said of %s: switched %v, stays %v:\n%s", fn, said, stays, stderr.String())
			}
		}
	})
	requireBPF(t)
	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		bt.RequireAttach(t)
		t.Run("-- CMD", func(t *testing.T) {
			bpf, br, bpfErr := startBpftrace(t, bt, fmt.Sprintf(`usdt:%[1]s:sw:entry__main__fib { @fib = count(); } usdt:%[1]s:sw:entry__main__Store__Put { @put = count(); @k[str(arg2)] = count(); } usdt:%[1]s:sw:exit__main__sum { @sum[arg2] = count(); }`, bin))
			// Unswitched, the probes fire at the notes on the
			// functions as compiled, through a trap; switched, at the
			// copies' sites; so each run counts each call once. sum
			// is never switched. Put's key, a string, is passed by
			// the copy alone, and the note on Put as compiled passes
			// 0 in its place.
			if out, err := exec.Command(bin).Output(); string(out) != want || exitCode(err) != 3 {
				t.Fatalf("%s: %q, %v", bin, out, err)
			}
			if out, err := exec.Command(tool, "switch", "main.*", "--", bin).Output(); string(out) != want || exitCode(err) != 3 {
				t.Fatalf("switch -- %s: %q, %v", bin, out, err)
			}
			rest := interruptBpftrace(t, bpf, br)
			// main calls fib(i%15) for i in [0, 200), and Put 200 times.
			fib := 0
			for i := range 200 {
				fib += fibCalls(i % 15)
			}
			for _, w := range []string{fmt.Sprintf("@fib: %d\n", 2*fib), "@put: 400\n", "@sum[14]: 2\n", "@k[]: 200\n", "@k[199]: 1\n"} {
				if !strings.Contains(rest, w) {
					t.Errorf("bpftrace counted, want %q:\n%s%s", w, rest, bpfErr.String())
				}
			}
		})
		t.Run("-p", func(t *testing.T) {
			prog, stdin, call := startFib(t, bin)
			bpf, br, bpfErr := startBpftrace(t, bt, fmt.Sprintf(`usdt:%s:sw:entry__main__fib { @fib = count(); }`, bin))
			call() // unswitched: counted at the note, through a trap
			sw, said := startSwitchFib(t, tool, prog.Process.Pid)
			if l, _ := said.ReadString('\n'); !strings.Contains(l, "1 of 1 functions of process") {
				t.Fatalf("switch said %q", l)
			}
			call() // switched: counted
			sw.Process.Signal(os.Interrupt)
			if err := sw.Wait(); err != nil {
				rest, _ := io.ReadAll(said)
				t.Fatalf("switch, interrupted: %v\n%s", err, rest)
			}
			call() // switched back: counted at the note again
			stdin.Close()
			if err := prog.Wait(); err != nil {
				t.Errorf("the program: %v", err)
			}
			rest := interruptBpftrace(t, bpf, br)
			if want := fmt.Sprintf("@fib: %d\n", 3*fibCalls(10)); !strings.Contains(rest, want) {
				t.Errorf("bpftrace counted, want %s:\n%s%s", want, rest, bpfErr.String())
			}
		})
	})
	t.Run("-p killed", func(t *testing.T) {
		killSwitcher(t, bin, func(pid int) (*exec.Cmd, io.Reader) { return startSwitchFib(t, tool, pid) })
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

// switchStats are the calls trace -stats counts, by function.
var switchStats = regexp.MustCompile(`(?m)^(main\.[\w.()*]+): (\d+) calls`)

// TestTraceSwitches traces switchSrc, built with sites: switch, through
// each transport: trace switches the functions it traces to their
// traced copies, whose probes then count every call exactly, and says
// which it cannot switch (sum, on amd64). A command is switched at its
// exec, before its first instruction; a running process (-p) from the
// moment trace says it attached, and switched back when trace ends,
// its functions' bytes as the executable holds them.
func TestTraceSwitches(t *testing.T) {
	bin := buildMainRules(t, target{}, "switch", switchSrc, switchRules)
	fib := 0
	for i := range 200 {
		fib += fibCalls(i % 15)
	}
	eachTransport(t, func(t *testing.T, transport string) {
		t.Run("-- CMD", func(t *testing.T) {
			stdout, stderr, err := usdtTrace(t, "-transport", transport, "-stats", "--", bin)
			if exitCode(err) != 3 || !strings.Contains(stderr, strings.TrimSpace(switchOutput)) {
				t.Fatalf("trace: %v, want the program's exit status 3 and its output\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			got := map[string]int{}
			for _, m := range switchStats.FindAllStringSubmatch(stdout, -1) {
				got[m[1]], _ = strconv.Atoi(m[2])
			}
			// main.main exits through os.Exit, and -stats counts a
			// call at its exit probe.
			// sum cannot be switched (switchedBySwitch): BPF counts
			// its call at the note on its code, and the ring, which
			// records the copy alone, does not.
			want := map[string]int{"main.fib": fib, "main.(*Store).Put": 200, "main.Store.Get": 1, "main.done": 1, "main.sum": 0}
			says := "main.sum stays as compiled: .*: its calls go untraced\n"
			if transport == "bpf" {
				want["main.sum"] = 1
				says = "main.sum stays as compiled: .*: its calls fire at the notes on its code, with a trap each\n"
			}
			for fn, n := range want {
				if got[fn] != n {
					t.Errorf("trace counted %d calls of %s, want %d:\n%s\n%s", got[fn], fn, n, stdout, stderr)
				}
			}
			if !regexp.MustCompile(says).MatchString(stderr) {
				t.Errorf("trace did not say %q:\n%s", says, stderr)
			}
		})
		t.Run("-p", func(t *testing.T) {
			prog, stdin, call := startFib(t, bin)
			call() // untraced
			var out strings.Builder
			tr, said := startTraceReading(t, &out, "-v", "-transport", transport, "-stats", "-p", strconv.Itoa(prog.Process.Pid), "main.fib")
			errOut := awaitAttached(t, said)
			if !strings.Contains(errOut.String(), "switched 1 of 1 functions of process") {
				t.Errorf("trace -v did not say it switched main.fib:\n%s", errOut.String())
			}
			call() // traced: fib(10) counted
			tr.Process.Signal(os.Interrupt)
			rest, _ := io.ReadAll(said)
			if err := tr.Wait(); err != nil {
				t.Fatalf("trace, interrupted: %v\n%s%s", err, errOut.String(), rest)
			}
			if !strings.Contains(string(rest), "switched back 1 functions of process") {
				t.Errorf("trace -v did not say it switched main.fib back:\n%s", rest)
			}
			if want := fmt.Sprintf("main.fib: %d calls", fibCalls(10)); !strings.Contains(out.String(), want) {
				t.Errorf("trace counted, want %s:\n%s\n%s%s", want, out.String(), errOut.String(), rest)
			}
			// Switched back: the bytes of main.fib are the file's.
			if cur, want := fibBytes(t, bin, prog.Process.Pid); !slices.Equal(cur, want) {
				t.Errorf("main.fib after trace: % x, want the executable's % x", cur, want)
			}
			call() // untraced again, and working
			stdin.Close()
			if err := prog.Wait(); err != nil {
				t.Errorf("the program: %v", err)
			}
		})
		// Interrupted or killed alone, trace ends and the command goes
		// on: its functions run their own code again once the keeper
		// switched them back, after trace and the holder let go.
		for _, sig := range []os.Signal{os.Interrupt, os.Kill} {
			t.Run("-- CMD outlives trace/"+sig.String(), func(t *testing.T) {
				tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "trace", "-v", "-transport", transport, "--", bin, "-wait")
				// Pipes of the test's, not exec's, which Wait closes: the
				// command keeps them past trace's end.
				in, stdin, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				said, out, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer said.Close()
				defer stdin.Close()
				tr.Stdin, tr.Stderr = in, out
				err = tr.Start()
				in.Close()
				out.Close()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
				errs := bufio.NewReader(said)
				var lines strings.Builder
				pid := 0
				for pid == 0 {
					l, err := errs.ReadString('\n')
					lines.WriteString(l)
					if err != nil {
						t.Fatalf("trace did not say what it switched (%v):\n%s", err, lines.String())
					}
					if m := regexp.MustCompile(`functions of process (\d+) to their traced copies`).FindStringSubmatch(l); m != nil {
						pid, _ = strconv.Atoi(m[1])
					}
				}
				prog, err := os.FindProcess(pid)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { prog.Kill() })
				if cur, plain := fibBytes(t, bin, pid); slices.Equal(cur, plain) {
					t.Fatalf("main.fib not switched:\n%s", lines.String())
				}
				tr.Process.Signal(sig)
				go io.Copy(io.Discard, errs)
				tr.Wait()
				awaitSwitchedBack(t, bin, pid)
			})
		}
		t.Run("-p killed", func(t *testing.T) {
			killSwitcher(t, bin, func(pid int) (*exec.Cmd, io.Reader) {
				return startTraceReading(t, io.Discard, "-v", "-transport", transport, "-p", strconv.Itoa(pid), "main.fib")
			})
		})
	})
}

// killSwitcher runs switchSrc, has start switch its main.fib, kills
// the switcher (SIGKILL) and checks that the function is switched back
// within 2 s, and that the program still answers and ends well.
func killSwitcher(t *testing.T, bin string, start func(pid int) (*exec.Cmd, io.Reader)) {
	t.Helper()
	prog, stdin, call := startFib(t, bin)
	sw, said := start(prog.Process.Pid)
	awaitSwitched(t, bin, prog.Process.Pid, said)
	sw.Process.Kill()
	sw.Wait()
	awaitSwitchedBack(t, bin, prog.Process.Pid)
	call()
	stdin.Close()
	if err := prog.Wait(); err != nil {
		t.Errorf("the program: %v", err)
	}
}

// fibBytes returns the bytes of main.fib's switch in process pid, which
// runs bin, and the executable's.
func fibBytes(t *testing.T, bin string, pid int) (cur, plain []byte) {
	t.Helper()
	pairs, err := switchplan.Pairs(bin, []string{"main.fib"})
	if err != nil || len(pairs) != 1 || pairs[0].Patch == nil {
		t.Fatalf("switchplan.Pairs: %v, %+v", err, pairs)
	}
	bias, err := ring.BiasOf(pid, bin)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for _, w := range pairs[0].Patch.Moved(bias).Writes {
		b := make([]byte, len(w.Old))
		if _, err := mem.ReadAt(b, int64(w.At)); err != nil {
			t.Fatal(err)
		}
		cur, plain = append(cur, b...), append(plain, w.Old...)
	}
	return cur, plain
}

// awaitSwitched waits up to 10 s for main.fib of process pid to be
// switched, reading its tracer's stderr, said, the while.
func awaitSwitched(t *testing.T, bin string, pid int, said io.Reader) {
	t.Helper()
	var lines safeBuffer
	go io.Copy(&lines, said)
	deadline := time.Now().Add(10 * time.Second * time.Duration(tracetest.TimeSlack))
	for {
		if cur, plain := fibBytes(t, bin, pid); !slices.Equal(cur, plain) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("main.fib was not switched in 10 s; the tracer said:\n%s", lines.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitSwitchedBack waits up to 2 s for main.fib of process pid to be
// switched back, its bytes the executable's, after its tracer died.
func awaitSwitchedBack(t *testing.T, bin string, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second * time.Duration(tracetest.TimeSlack))
	for {
		cur, plain := fibBytes(t, bin, pid)
		if slices.Equal(cur, plain) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("main.fib still switched 2 s after its tracer died: % x, the executable's % x", cur, plain)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// safeBuffer is a strings.Builder that a goroutine writes while the test
// reads it.
type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestSwitchesCounted has two tracers switch main.fib of one process,
// usdt-toolexec switch -p and then trace -stats -p, through each
// transport: the first to end, whether it ends well or is killed,
// leaves the function switched for the other, whose counts stay exact,
// and the last switches it back (internal/switchhold).
func TestSwitchesCounted(t *testing.T) {
	bin := buildMainRules(t, target{}, "switch", switchSrc, switchRules)
	tool := filepath.Join(toolsDir, "usdt-toolexec")
	eachTransport(t, func(t *testing.T, transport string) {
		for _, end := range []os.Signal{os.Interrupt, os.Kill} {
			t.Run("switch ends first/"+end.String(), func(t *testing.T) {
				prog, stdin, call := startFib(t, bin)
				pid := prog.Process.Pid
				sw, swSaid := startSwitchFib(t, tool, pid)
				if l, _ := swSaid.ReadString('\n'); !strings.Contains(l, "1 of 1 functions of process") {
					t.Fatalf("switch said %q", l)
				}
				go io.Copy(io.Discard, swSaid)
				var out safeBuffer
				tr, said := startTraceReading(t, &out, "-v", "-transport", transport, "-stats", "-p", strconv.Itoa(pid), "main.fib")
				errOut := awaitAttached(t, said)
				call() // counted
				sw.Process.Signal(end)
				sw.Wait()
				// Its keeper, after a kill, has had the time it takes.
				time.Sleep(500 * time.Millisecond * time.Duration(tracetest.TimeSlack))
				if cur, plain := fibBytes(t, bin, pid); slices.Equal(cur, plain) {
					t.Errorf("switch ended (%v) and switched main.fib back under trace", end)
				}
				call() // counted still
				tr.Process.Signal(os.Interrupt)
				rest, _ := io.ReadAll(said)
				if err := tr.Wait(); err != nil {
					t.Fatalf("trace, interrupted: %v\n%s%s", err, errOut.String(), rest)
				}
				if want := fmt.Sprintf("main.fib: %d calls", 2*fibCalls(10)); !strings.Contains(out.String(), want) {
					t.Errorf("trace counted, want %s:\n%s\n%s%s", want, out.String(), errOut.String(), rest)
				}
				if cur, plain := fibBytes(t, bin, pid); !slices.Equal(cur, plain) {
					t.Errorf("trace, the last to hold main.fib, ended and left it switched: % x, the executable's % x\n%s%s", cur, plain, errOut.String(), rest)
				}
				call()
				stdin.Close()
				if err := prog.Wait(); err != nil {
					t.Errorf("the program: %v", err)
				}
			})
		}
		t.Run("trace ends first", func(t *testing.T) {
			prog, stdin, call := startFib(t, bin)
			pid := prog.Process.Pid
			sw, swSaid := startSwitchFib(t, tool, pid)
			if l, _ := swSaid.ReadString('\n'); !strings.Contains(l, "1 of 1 functions of process") {
				t.Fatalf("switch said %q", l)
			}
			var swRest safeBuffer
			go io.Copy(&swRest, swSaid)
			tr, said := startTraceReading(t, io.Discard, "-v", "-transport", transport, "-stats", "-p", strconv.Itoa(pid), "main.fib")
			awaitAttached(t, said)
			call()
			tr.Process.Signal(os.Interrupt)
			io.Copy(io.Discard, said)
			tr.Wait()
			if cur, plain := fibBytes(t, bin, pid); slices.Equal(cur, plain) {
				t.Error("trace ended and switched main.fib back under switch")
			}
			call()
			sw.Process.Signal(os.Interrupt)
			if err := sw.Wait(); err != nil {
				t.Fatalf("switch, interrupted: %v\n%s", err, swRest.String())
			}
			if cur, plain := fibBytes(t, bin, pid); !slices.Equal(cur, plain) {
				t.Errorf("switch, the last to hold main.fib, ended and left it switched: % x, the executable's % x\n%s", cur, plain, swRest.String())
			}
			call()
			stdin.Close()
			if err := prog.Wait(); err != nil {
				t.Errorf("the program: %v", err)
			}
		})
	})
}

// awaitAttached reads trace -v's stderr, said, up to the line that says
// it attached, and returns what it read.
func awaitAttached(t *testing.T, said *bufio.Reader) *strings.Builder {
	t.Helper()
	var errOut strings.Builder
	for !strings.Contains(errOut.String(), "attached") {
		l, err := said.ReadString('\n')
		errOut.WriteString(l)
		if err != nil {
			t.Fatalf("trace -v did not say it attached (%v):\n%s", err, errOut.String())
		}
	}
	return &errOut
}
