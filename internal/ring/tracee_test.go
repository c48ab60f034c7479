package ring

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/go-usdt/usdt/internal/ringlayout"
	"golang.org/x/sys/unix"
)

// roleEnv has this test binary play a part of TestTraceeKilledAtEveryStep:
// "program", the traced process, or "tracer".
const roleEnv = "USDT_RING_TEST_ROLE"

// A program's probes, as the test's program lays them out: wide
// semaphores (an automatic probe's 32-bit slot, whose low half the
// kernel counts in) and narrow ones (a usdtgen probe's 16 bits), with the
// counts that another consumer, bpftrace say, holds in them throughout.
const (
	nWide, nNarrow = 6, 4
	otherCount     = 2
	narrowCount    = 3
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "program":
		runTestProgram()
	case "tracer":
		runTestTracer()
	}
	os.Exit(m.Run())
}

// testProgram is where the program of TestTraceeKilledAtEveryStep has its
// ring, its Where words and its semaphores.
type testProgram struct {
	ctl, where uint64
	wide       []uint64 // the low halves
	narrow     []uint64
}

func (p testProgram) String() string {
	f := []string{strconv.FormatUint(p.ctl, 10), strconv.FormatUint(p.where, 10)}
	for _, a := range append(append([]uint64{}, p.wide...), p.narrow...) {
		f = append(f, strconv.FormatUint(a, 10))
	}
	return strings.Join(f, " ")
}

func parseTestProgram(line string) (testProgram, error) {
	var w []uint64
	for f := range strings.FieldsSeq(line) {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return testProgram{}, fmt.Errorf("the program's line %q: %v", line, err)
		}
		w = append(w, v)
	}
	if len(w) != 2+nWide+nNarrow {
		return testProgram{}, fmt.Errorf("the program's line %q has %d words, want %d", line, len(w), 2+nWide+nNarrow)
	}
	return testProgram{ctl: w[0], where: w[1], wide: w[2 : 2+nWide], narrow: w[2+nWide:]}, nil
}

// runTestProgram is the traced program: a ring and semaphores in its
// memory, their addresses on stdout, until stdin ends. It fires no probe,
// so that only a tracer takes down what a killed one left on.
func runTestProgram() {
	// A sibling, not a parent, traces it: under Yama's ptrace_scope 1
	// the program names any process its tracer.
	unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0)
	ctl := make([]byte, ringlayout.DataAt+1<<16)
	where := make([]byte, 16)
	at := uint64(uintptr(unsafe.Pointer(&ctl[0])))
	binary.LittleEndian.PutUint64(where, ringlayout.WhereMagic)
	binary.LittleEndian.PutUint64(where[8:], at)
	wide := make([]uint32, nWide)
	narrow := make([]uint16, nNarrow)
	p := testProgram{ctl: at, where: uint64(uintptr(unsafe.Pointer(&where[0])))}
	for i := range wide {
		wide[i] = otherCount
		p.wide = append(p.wide, uint64(uintptr(unsafe.Pointer(&wide[i]))))
	}
	for i := range narrow {
		narrow[i] = narrowCount
		p.narrow = append(p.narrow, uint64(uintptr(unsafe.Pointer(&narrow[i]))))
	}
	fmt.Println(p)
	io.Copy(io.Discard, os.Stdin)
	sink = append(sink, ctl, where, wide, narrow)
	os.Exit(0)
}

// runTestTracer attaches to the program its arguments name, counting its
// probes, and detaches again where PauseEnv names a step of Detach. It
// prints "attached" once attached, and exits 0 at its end.
func runTestTracer() {
	pid, _ := strconv.Atoi(os.Getenv("USDT_RING_TEST_PID"))
	p, err := parseTestProgram(os.Getenv("USDT_RING_TEST_PROGRAM"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var sems []Semaphore
	var sites []Site
	for i, a := range p.wide {
		sems = append(sems, Semaphore{Addr: a, Wide: true})
		sites = append(sites, Site{Addr: 0x401000 + uint64(i)*16, First: i})
	}
	for _, a := range p.narrow {
		sems = append(sems, Semaphore{Addr: a})
	}
	tr, err := Attach(Target{
		Pid: pid, Ctl: p.ctl, Where: p.where, Slots: 1, Size: 4096, Sems: sems,
		Prepare: func(s *Session) error { return s.Count(sites, len(sites), true) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "attach:", err)
		os.Exit(2)
	}
	fmt.Println("attached")
	detaching := false
	for _, st := range Steps {
		detaching = detaching || st.Detaching && st.Name == os.Getenv(PauseEnv)
	}
	if detaching {
		if err := tr.Detach(); err != nil {
			fmt.Fprintln(os.Stderr, "detach:", err)
			os.Exit(2)
		}
	}
	tr.Close()
	os.Exit(0)
}

// TestTraceeKilledAtEveryStep drives a Tracee to each step of its life
// (Steps), in a tracer process that PauseEnv stops there, and kills the
// tracer with SIGKILL. The program, another process, fires no probe, so
// what the killed tracer left on is the next tracer's to take down: its
// Open, once the lease has run out, must find the ring free or take it
// over, and leave every semaphore as the program had it before the first
// tracer came (the kernel's half of each wide one, and the counts another
// consumer holds in the narrow ones, untouched). Then the program is
// traced again, and the test checks that every probe is on.
func TestTraceeKilledAtEveryStep(t *testing.T) {
	prog := exec.Command(os.Args[0], "-test.run=^$")
	prog.Env = append(os.Environ(), roleEnv+"=program")
	stdin, err := prog.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := prog.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	prog.Stderr = os.Stderr
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); prog.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the program said nothing: %v", err)
	}
	p, err := parseTestProgram(line)
	if err != nil {
		t.Fatal(err)
	}
	pid := prog.Process.Pid
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	read := func(addr uint64, n int) uint64 {
		b := make([]byte, 8)
		if _, err := mem.ReadAt(b[:n], int64(addr)); err != nil {
			t.Fatalf("reading the program at %#x: %v", addr, err)
		}
		return binary.LittleEndian.Uint64(b)
	}
	// sems returns the semaphores, as "wide slot, ..., narrow, ...".
	sems := func() string {
		var f []string
		for _, a := range p.wide {
			f = append(f, fmt.Sprintf("%#x", read(a, 4)))
		}
		for _, a := range p.narrow {
			f = append(f, strconv.FormatUint(read(a, 2), 10))
		}
		return strings.Join(f, " ")
	}
	var untraced, traced []string
	for range p.wide {
		untraced = append(untraced, fmt.Sprintf("%#x", otherCount))
		traced = append(traced, fmt.Sprintf("%#x", 1<<16|otherCount))
	}
	for range p.narrow {
		untraced = append(untraced, strconv.Itoa(narrowCount))
		traced = append(traced, strconv.Itoa(narrowCount+1))
	}
	want, on := strings.Join(untraced, " "), strings.Join(traced, " ")
	if got := sems(); got != want {
		t.Fatalf("the program's semaphores are %s before any tracer, want %s", got, want)
	}
	// next is the next tracer: it opens the ring within 2 s of the
	// lease's end, as Attach's Open does, and stops it again.
	next := func(t *testing.T, killed time.Time) {
		t.Helper()
		for {
			s, err := Open(pid, p.ctl, p.where, 1, 4096)
			if err == nil {
				if got := sems(); got != want {
					t.Errorf("the semaphores are %s once the next tracer opened the ring, want %s", got, want)
				}
				s.Stop()
				s.Close()
				return
			}
			if time.Since(killed) > Lease+2*time.Second {
				t.Fatalf("the next tracer could not open the ring %v after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	tracer := func(step string) *exec.Cmd {
		tr := exec.Command(os.Args[0], "-test.run=^$")
		tr.Env = append(os.Environ(), roleEnv+"=tracer", PauseEnv+"="+step, "USDT_RING_TEST_PID="+strconv.Itoa(pid), "USDT_RING_TEST_PROGRAM="+p.String())
		tr.Stderr = os.Stderr
		return tr
	}
	for _, step := range Steps {
		t.Run(step.Name, func(t *testing.T) {
			tr := tracer(step.Name)
			if err := tr.Start(); err != nil {
				t.Fatal(err)
			}
			if !waitStop(tr.Process.Pid, 10*time.Second) {
				tr.Process.Kill()
				tr.Wait()
				t.Fatalf("the tracer did not stop at %s", step.Name)
			}
			t.Logf("the semaphores at %s: %s", step.Name, sems())
			tr.Process.Kill()
			tr.Wait()
			next(t, time.Now())
		})
	}
	// A tracer that lives turns every probe on, and off at its end.
	tr := tracer("")
	stdout, _ := tr.StdoutPipe()
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	attached, _ := bufio.NewReader(stdout).ReadString('\n')
	got := sems()
	if err := tr.Wait(); err != nil || attached != "attached\n" {
		t.Fatalf("the last tracer: %v (it said %q)", err, attached)
	}
	// It ended without Detach: the next tracer takes its probes down.
	next(t, time.Now())
	if got != on {
		t.Errorf("the semaphores are %s while traced, want %s", got, on)
	}
}

// waitStop waits up to d for process pid to be stopped (state T).
func waitStop(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		state, ok := StatusField(fmt.Sprintf("/proc/%d/status", pid), "State")
		if !ok {
			return false
		}
		if strings.HasPrefix(state, "T") {
			return true
		}
	}
	return false
}
