package textpatch

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/go-usdt/usdt/internal/procstat"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// roleEnv has this test binary play a part: "program", the process
// whose function is switched, or "switcher", a tracer that a test kills
// inside a stop of the program.
const roleEnv = "USDT_TEXTPATCH_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "program":
		runProgram()
	case "switcher":
		runSwitcher()
	}
	os.Exit(m.Run())
}

// The program's counters: plainCalls counts the calls that ran plainF,
// tracedCalls those that ran tracedF. Tests read them through
// /proc/PID/mem.
var plainCalls, tracedCalls atomic.Int64

// plainF and tracedF have one signature and one result; plainF is the
// function switched. Each calls mix, so has a frame and a stack check.
//
//go:noinline
func plainF(x int) int {
	plainCalls.Add(1)
	return mix(x)
}

//go:noinline
func tracedF(x int) int {
	tracedCalls.Add(1)
	return mix(x)
}

//go:noinline
func mix(x int) int { return x*2 + 1 }

// deep grows its goroutine's stack before it calls plainF, so that the
// call runs runtime.morestack, which returns to plainF's entry.
//
//go:noinline
func deep(n int) int {
	var pad [512]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return plainF(7) + int(pad[0])
	}
	return deep(n-1) + int(pad[n%len(pad)]) - n%256
}

// runProgram calls plainF from 8 goroutines in tight loops while the
// GC churns, new goroutines grow their stacks through it, a CPU profile
// sends SIGPROF, and async preemption is on; it checks every result,
// and ends when its input does.
func runProgram() {
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		os.Exit(2)
	}
	wrong := func(what string, got, want int) {
		fmt.Fprintf(os.Stderr, "wrong %s: %d, want %d\n", what, got, want)
		os.Exit(3)
	}
	for range 8 {
		go func() {
			for x := 0; ; x++ {
				if got := plainF(x); got != x*2+1 {
					wrong("plainF", got, x*2+1)
				}
			}
		}()
	}
	go func() {
		for {
			done := make(chan int)
			go func() { done <- deep(100) }()
			if got := <-done; got != 15 {
				wrong("deep", got, 15)
			}
		}
	}()
	go func() {
		var keep [][]byte
		for i := 0; ; i++ {
			keep = append(keep, make([]byte, 1<<12))
			if len(keep) > 1024 {
				keep = nil
			}
			if i%4096 == 0 {
				runtime.GC()
			}
		}
	}()
	if mix(0) == 0 { // never: keeps tracedF, which the tests switch to
		tracedF(0)
	}
	fmt.Println("ready", uintptr(unsafe.Pointer(&plainCalls)), uintptr(unsafe.Pointer(&tracedCalls)))
	io.Copy(io.Discard, os.Stdin)
	pprof.StopCPUProfile()
	fmt.Println("ok")
	os.Exit(0)
}

const pkgPath = "github.com/go-usdt/usdt/internal/textpatch."

// testPatch plans switching plainF to tracedF in this test binary.
func testPatch(t *testing.T) Patch {
	t.Helper()
	pl, err := NewPlanner(openELF(t, self(t)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pl.Plan(pkgPath+"plainF", pkgPath+"tracedF")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A program is a running runProgram.
type program struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	mem   *os.File
	stder *bytes.Buffer
	// plainAt and tracedAt are the counters' addresses.
	plainAt, tracedAt uint64
}

func startProgram(t *testing.T) *program {
	t.Helper()
	cmd := exec.Command(self(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=program")
	p := &program{t: t, cmd: cmd, stder: new(bytes.Buffer)}
	cmd.Stderr = p.stder
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, _ := p.out.ReadString('\n')
	if _, err := fmt.Sscanf(line, "ready %d %d\n", &p.plainAt, &p.tracedAt); err != nil {
		t.Fatalf("program: %q, %v; stderr: %s", line, err, p.stder)
	}
	if p.mem, err = os.Open(fmt.Sprintf("/proc/%d/mem", cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.mem.Close() })
	return p
}

func (p *program) pid() int { return p.cmd.Process.Pid }

// read reads 8 bytes of the program's memory.
func (p *program) read(addr uint64) int64 {
	p.t.Helper()
	var b [8]byte
	if _, err := p.mem.ReadAt(b[:], int64(addr)); err != nil {
		p.t.Fatalf("read %#x: %v; stderr: %s", addr, err, p.stder)
	}
	return int64(binary.LittleEndian.Uint64(b[:]))
}

// bytesAt reads n bytes of the program's memory.
func (p *program) bytesAt(addr uint64, n int) []byte {
	p.t.Helper()
	b := make([]byte, n)
	if _, err := p.mem.ReadAt(b, int64(addr)); err != nil {
		p.t.Fatalf("read %#x: %v", addr, err)
	}
	return b
}

// grows waits until the counter at addr passes from+n.
func (p *program) grows(addr uint64, from, n int64) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if p.read(addr) > from+n {
			return true
		}
		time.Sleep(50 * time.Microsecond)
	}
	return false
}

// end closes the program's input and checks that it ends as it should.
func (p *program) end() {
	p.t.Helper()
	p.in.Close()
	rest, _ := io.ReadAll(p.out)
	if err := p.cmd.Wait(); err != nil || string(rest) != "ok\n" {
		p.t.Fatalf("program: %v, output %q; stderr: %s", err, rest, p.stder)
	}
}

// inFlight bounds the calls of the function switched away from that
// end after a switch returns: one a goroutine that calls it (8 loops and
// deep's one), each of which may be past the entry already.
const inFlight = 9

// TestSwitchUnderLoad switches plainF to tracedF and back 1,000 times
// (100 with -short) while the program runs, and checks after each
// write that no call begins in the function switched away from: its
// counter moves by the calls in flight at most, while the other's
// grows.
func TestSwitchUnderLoad(t *testing.T) {
	patch := testPatch(t)
	prog := startProgram(t)
	plainAt, tracedAt := prog.plainAt, prog.tracedAt
	cycles := 1000
	if testing.Short() {
		cycles = 100
	}
	var longest time.Duration
	var stops, threads int
	check := func(on bool) {
		t.Helper()
		write, want, grow, still := Switch, Switched, tracedAt, plainAt
		if !on {
			write, want, grow, still = Restore, Restored, plainAt, tracedAt
		}
		rep, err := write(prog.pid(), []Patch{patch}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Results[0]; got.Outcome != want {
			t.Fatalf("%v, want %v", got, want)
		}
		longest, stops, threads = max(longest, rep.Longest), stops+rep.Stops, max(threads, rep.Threads)
		before, g := prog.read(still), prog.read(grow)
		if !prog.grows(grow, g, 1000) {
			t.Fatalf("after %v, the calls it should run did not grow: %d, stderr: %s", want, prog.read(grow), prog.stder)
		}
		if d := prog.read(still) - before; d > inFlight {
			t.Fatalf("after %v, %d calls still began in the function switched away from (at most %d were in flight)", want, d, inFlight)
		}
	}
	for range cycles {
		check(true)
		check(false)
	}
	prog.end()
	t.Logf("%d switches and restores: %d stops of up to %d threads, the longest %v", 2*cycles, stops, threads, longest)
}

// runSwitcher is a tracer that switches (USDT_TEXTPATCH_TEST_DIR=on) or
// restores the patch in USDT_TEXTPATCH_TEST_PATCH and stops for good at
// the step USDT_TEXTPATCH_TEST_STEP, saying so.
func runSwitcher() {
	pid, _ := strconv.Atoi(os.Getenv("USDT_TEXTPATCH_TEST_PID"))
	var p Patch
	if err := decodePatch(os.Getenv("USDT_TEXTPATCH_TEST_PATCH"), &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	step := os.Getenv("USDT_TEXTPATCH_TEST_STEP")
	opt := Options{pause: func(at string) {
		if at == step {
			fmt.Println("paused")
			select {}
		}
	}}
	_, err := write(pid, []Patch{p}, os.Getenv("USDT_TEXTPATCH_TEST_DIR") == "on", opt)
	fmt.Println("done", err)
	os.Exit(0)
}

// encodePatch and decodePatch carry a patch to the switcher.
func encodePatch(p Patch) string {
	var b strings.Builder
	for _, w := range p.Writes {
		fmt.Fprintf(&b, "%x %x %x ", w.At, w.Old, w.New)
	}
	return b.String()
}

func decodePatch(s string, p *Patch) error {
	f := strings.Fields(s)
	for ; len(f) >= 3; f = f[3:] {
		var w Write
		if _, err := fmt.Sscanf(strings.Join(f[:3], " "), "%x %x %x", &w.At, &w.Old, &w.New); err != nil {
			return err
		}
		p.Writes = append(p.Writes, w)
	}
	return nil
}

// state returns which of p's writes are in the program's memory: "plain"
// (none), "switched" (all), or "half" (the first only, in the order of a
// switch).
func (prog *program) state(p Patch) string {
	prog.t.Helper()
	var done []bool
	for _, w := range p.Writes {
		cur := prog.bytesAt(w.At, len(w.New))
		switch {
		case bytes.Equal(cur, w.New):
			done = append(done, true)
		case bytes.Equal(cur, w.Old):
			done = append(done, false)
		default:
			prog.t.Fatalf("bytes at %#x: % x, neither % x nor % x", w.At, cur, w.Old, w.New)
		}
	}
	switch {
	case !slices.Contains(done, false):
		return "switched"
	case !slices.Contains(done, true):
		return "plain"
	case len(done) == 2 && done[0]:
		return "half"
	}
	prog.t.Fatalf("writes %v: not a state a switch or a restore passes through", done)
	return ""
}

// TestSwitcherKilledAtEveryStep kills a tracer at each step of a switch
// and of a restore, with the program stopped: the kernel lets the
// program's threads go, and the program must run on correctly, with the
// entry whole (plain or switched), and take the next tracer's writes.
func TestSwitcherKilledAtEveryStep(t *testing.T) {
	patch := testPatch(t)
	exe := self(t)
	for _, on := range []bool{true, false} {
		for _, step := range Steps {
			if step == "one written" && len(patch.Writes) < 2 {
				continue
			}
			t.Run(fmt.Sprintf("switch=%v/%s", on, step), func(t *testing.T) {
				prog := startProgram(t)
				plainAt, tracedAt := prog.plainAt, prog.tracedAt
				if !on {
					if rep, err := Switch(prog.pid(), []Patch{patch}, Options{}); err != nil || rep.Results[0].Outcome != Switched {
						t.Fatal(rep, err)
					}
				}
				sw := exec.Command(exe, "-test.run=^$")
				dir := "off"
				if on {
					dir = "on"
				}
				sw.Env = append(os.Environ(), roleEnv+"=switcher",
					"USDT_TEXTPATCH_TEST_PID="+strconv.Itoa(prog.pid()),
					"USDT_TEXTPATCH_TEST_PATCH="+encodePatch(patch),
					"USDT_TEXTPATCH_TEST_STEP="+step,
					"USDT_TEXTPATCH_TEST_DIR="+dir)
				var errb bytes.Buffer
				sw.Stderr = &errb
				out, err := sw.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := sw.Start(); err != nil {
					t.Fatal(err)
				}
				line, _ := bufio.NewReader(out).ReadString('\n')
				if line != "paused\n" {
					sw.Process.Kill()
					sw.Wait()
					t.Fatalf("switcher: %q; stderr: %s", line, errb.String())
				}
				// The program is stopped.
				if st := procState(prog.pid()); st != "t" && st != "T" {
					t.Errorf("program state %q while the switcher is paused, want t (stopped by its tracer)", st)
				}
				sw.Process.Signal(syscall.SIGKILL)
				sw.Wait()
				// Plain and half-switched run plainF (the half switch
				// only runs tracedF when a stack must grow); switched
				// runs tracedF.
				runs := plainAt
				if prog.state(patch) == "switched" {
					runs = tracedAt
				}
				if n := prog.read(runs); !prog.grows(runs, n, 1000) {
					t.Fatalf("the program does not run on after its tracer died: stderr %s", prog.stder)
				}
				// The next tracer finds the program as the dead one
				// left it, and writes.
				for _, write := range []func(int, []Patch, Options) (Report, error){Switch, Restore} {
					rep, err := write(prog.pid(), []Patch{patch}, Options{})
					if err != nil {
						t.Fatal(err)
					}
					if o := rep.Results[0].Outcome; o == Busy || o == Changed {
						t.Fatalf("next tracer: %v", rep.Results[0])
					}
				}
				if n := prog.read(plainAt); !prog.grows(plainAt, n, 1000) {
					t.Fatal("plainF does not run after the restore")
				}
				prog.end()
			})
		}
	}
}

// procState is the state letter of process pid.
func procState(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	st, _ := procstat.State(b)
	return st
}

// TestSwitchWithUprobe puts a kernel uprobe (through tracefs, as perf
// probe and bpftrace's uprobe: do) on plainF's entry, before and after
// the switch, and removes it: its trap is written over the entry's first
// byte, which the switch leaves alone, and its removal puts back the
// byte the file holds, so the jump is whole again, not torn.
func TestSwitchWithUprobe(t *testing.T) {
	if os.Geteuid() != 0 {
		tracetest.SkipMissing(t, "a uprobe through tracefs needs root")
	}
	if err := tracetest.MountTracefs(); err != nil {
		tracetest.SkipMissing(t, "tracefs: %v", err)
	}
	patch := testPatch(t)
	exe := self(t)
	off := fileOffset(t, exe, patch.Entry)
	events := filepath.Join(tracetest.TracefsDir, "uprobe_events")
	group := fmt.Sprintf("textpatch_test_%d", os.Getpid())
	appendTo := func(path, line string) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(line + "\n")
		return err
	}
	enable := filepath.Join(tracetest.TracefsDir, "events", group, "plainF", "enable")
	attach := func(t *testing.T) {
		t.Helper()
		if err := appendTo(events, fmt.Sprintf("p:%s/plainF %s:%#x", group, exe, off)); err != nil {
			tracetest.SkipMissing(t, "a uprobe through %s: %v", events, err)
		}
		if err := os.WriteFile(enable, []byte("1\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	detach := func(t *testing.T) {
		t.Helper()
		if err := os.WriteFile(enable, []byte("0\n"), 0); err != nil {
			t.Fatal(err)
		}
		if err := appendTo(events, fmt.Sprintf("-:%s/plainF", group)); err != nil {
			t.Fatal(err)
		}
	}
	remove := func() {
		os.WriteFile(enable, []byte("0\n"), 0)
		appendTo(events, fmt.Sprintf("-:%s/plainF", group))
	}
	hits := func() int {
		b, _ := os.ReadFile(filepath.Join(tracetest.TracefsDir, "uprobe_profile"))
		for _, line := range strings.Split(string(b), "\n") {
			// The file, the event's name without its group, the hits.
			if f := strings.Fields(line); len(f) == 3 && f[0] == exe && f[1] == "plainF" {
				n, _ := strconv.Atoi(f[2])
				return n
			}
		}
		return -1
	}
	// fired waits for the uprobe to fire: the program may not run at
	// once on a busy machine.
	fired := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for hits() <= 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the uprobe did not fire in 10 s: %d", hits())
			}
			time.Sleep(time.Millisecond)
		}
	}
	switched := func(t *testing.T, prog *program) {
		t.Helper()
		if s := prog.state(patch); s != "switched" {
			t.Fatalf("after the uprobe's removal: %s", s)
		}
		if n := prog.read(prog.tracedAt); !prog.grows(prog.tracedAt, n, 1000) {
			t.Fatal("tracedF does not run")
		}
	}
	if runtime.GOARCH == "arm64" {
		t.Skip("arm64: a uprobe's removal puts back the plain instruction, undoing the switch (see the package doc)")
	}

	t.Run("uprobe after the switch", func(t *testing.T) {
		t.Cleanup(remove)
		prog := startProgram(t)
		if rep, err := Switch(prog.pid(), []Patch{patch}, Options{}); err != nil || rep.Results[0].Outcome != Switched {
			t.Fatal(rep, err)
		}
		attach(t)
		if got := prog.bytesAt(patch.Entry, 1); got[0] != 0xcc {
			t.Fatalf("entry's first byte %#x with the uprobe on, want int3", got[0])
		}
		// The kernel runs the plain function's first instruction
		// out of line: the calls go on in plainF and fire the uprobe.
		if n := prog.read(prog.plainAt); !prog.grows(prog.plainAt, n, 1000) {
			t.Fatal("plainF does not run under the uprobe")
		}
		fired(t)
		detach(t)
		switched(t, prog)
		if rep, err := Restore(prog.pid(), []Patch{patch}, Options{}); err != nil || rep.Results[0].Outcome != Restored {
			t.Fatal(rep, err)
		}
		prog.end()
	})
	t.Run("uprobe before the switch", func(t *testing.T) {
		t.Cleanup(remove)
		prog := startProgram(t)
		attach(t)
		if rep, err := Switch(prog.pid(), []Patch{patch}, Options{}); err != nil || rep.Results[0].Outcome != Switched {
			t.Fatal(rep, err)
		}
		fired(t)
		detach(t)
		switched(t, prog)
		prog.end()
	})
}

// self is this test binary's path.
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// openELF opens exe for the test.
func openELF(t *testing.T, exe string) *elf.File {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fileOffset turns an address of exe's code into its file offset.
func fileOffset(t *testing.T, exe string, addr uint64) uint64 {
	t.Helper()
	for _, p := range openELF(t, exe).Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off
		}
	}
	t.Fatalf("%#x is in no executable segment", addr)
	return 0
}

// TestSwitchBudget switches with a budget too small for a second write
// in one stop: each stop writes one patch, so that 50 patches take 50
// stops, and each is written once (the same patch repeated: the first
// switches, the others find it switched).
func TestSwitchBudget(t *testing.T) {
	patch := testPatch(t)
	prog := startProgram(t)
	patches := slices.Repeat([]Patch{patch}, 50)
	for _, on := range []bool{true, false} {
		write, first, rest := Switch, Switched, AlreadySwitched
		if !on {
			write, first, rest = Restore, Restored, AlreadyRestored
		}
		rep, err := write(prog.pid(), patches, Options{Budget: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Stops != len(patches) {
			t.Errorf("%d patches in %d stops, want one a stop", len(patches), rep.Stops)
		}
		for i, r := range rep.Results {
			if want := map[bool]Outcome{true: first, false: rest}[i == 0]; r.Outcome != want {
				t.Fatalf("patch %d: %v, want %v", i, r, want)
			}
		}
	}
	if n := prog.read(prog.plainAt); !prog.grows(prog.plainAt, n, 1000) {
		t.Fatal("plainF does not run after the restore")
	}
	prog.end()
}

// TestReadAhead reads the bytes at patches' writes in a running program
// in chunks, as a stop reads them, and finds them equal to what
// /proc/PID/mem reads there, one write at a time; a chunk with a write
// at an address nothing maps is left to apply's own reads (nil).
func TestReadAhead(t *testing.T) {
	patch := testPatch(t)
	prog := startProgram(t)
	defer prog.end()
	mem, err := os.Open("/proc/" + strconv.Itoa(prog.pid()) + "/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	// More patches than a chunk holds, each at its own bytes.
	var patches []Patch
	for k := range 300 {
		p := patch
		p.Writes = nil
		for _, w := range patch.Writes {
			w.At += uint64(k)
			p.Writes = append(p.Writes, w)
		}
		patches = append(patches, p)
	}
	todo := make([]int, len(patches))
	for i := range todo {
		todo[i] = len(todo) - 1 - i // any order
	}
	r := readAhead{pid: prog.pid(), patches: patches, todo: todo}
	for n, i := range todo {
		got := r.bytes(n)
		if got == nil {
			t.Fatalf("patch %d of todo: no bytes read ahead", n)
		}
		for k, w := range patches[i].Writes {
			want := make([]byte, len(w.New))
			if _, err := mem.ReadAt(want, int64(w.At)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[k], want) {
				t.Fatalf("patch %d, write %d at %#x: read ahead % x, /proc/PID/mem % x", i, k, w.At, got[k], want)
			}
		}
	}
	if r.from != 256 || r.to != 300 {
		t.Errorf("the last chunk is todo[%d:%d], want [256:300]", r.from, r.to)
	}
	bad := slices.Clone(patches[:3])
	bad[1].Writes = []Write{{At: 0x1000, Old: []byte{0}, New: []byte{1}}}
	r = readAhead{pid: prog.pid(), patches: bad, todo: []int{0, 1, 2}}
	if got := r.bytes(0); got != nil {
		t.Errorf("a chunk with an unmapped write read ahead: % x", got)
	}
}
