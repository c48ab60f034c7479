package e2e

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// requireBPF skips unless this process may load BPF programs and attach
// uprobes, which usdt-toolexec trace needs.
func requireBPF(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("usdt-toolexec trace needs root (or CAP_BPF and CAP_PERFMON) to load BPF programs")
	}
	if err := features.HaveProgramType(ebpf.Kprobe); err != nil {
		t.Skipf("this kernel cannot load kprobe/uprobe BPF programs: %v", err)
	}
}

// hasCookies reports whether uprobes carry BPF cookies here (Linux 5.15+).
// Without them the tracer tells sites apart by their addresses in the
// executable, and does not trace position-independent ones.
func hasCookies() bool {
	return features.HaveProgramHelper(ebpf.Kprobe, asm.FnGetAttachCookie) == nil
}

// requireTraceable skips when usdt-toolexec trace cannot trace bin on
// this kernel: a position-independent executable without BPF cookies,
// where TestTracePIENeedsCookies checks what it says instead.
func requireTraceable(t *testing.T, bin string) {
	t.Helper()
	if hasCookies() {
		return
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Type == elf.ET_DYN {
		t.Skipf("this kernel (%s) has no BPF cookies for uprobes (Linux 5.15+), without which usdt-toolexec trace does not trace a position-independent executable; TestTracePIENeedsCookies checks what it says", kernelRelease())
	}
}

// TestTracePIENeedsCookies traces a position-independent executable on a
// kernel without BPF cookies for uprobes (before 5.15), where the tracer
// must say what it needs.
func TestTracePIENeedsCookies(t *testing.T) {
	requireBPF(t)
	if hasCookies() {
		t.Skip("this kernel has BPF cookies for uprobes (Linux 5.15+): the other trace tests trace position-independent executables")
	}
	bin := build(t, fixture(t, "types"), route{name: "a-pie", toolexec: true, flags: []string{"-buildmode=pie"}})
	_, errOut, err := usdtTrace(t, "--", bin, "once")
	if err == nil || !strings.Contains(errOut, "traces on Linux 5.15 and later") || !strings.Contains(errOut, "without -buildmode=pie") {
		t.Errorf("trace of a PIE on %s: %v, want a plain error naming Linux 5.15 and -buildmode=pie:\n%s", kernelRelease(), err, errOut)
	}
}

// usdtTrace runs usdt-toolexec trace with args and returns its stdout (the
// events) and stderr (the traced command's output and the tracer's
// messages).
func usdtTrace(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	stdout, stderr, _, err = usdtTraceState(t, args...)
	return stdout, stderr, err
}

// usdtTraceState is usdtTrace, with the state trace ended in: its
// resources, those of the processes it waited for with them.
func usdtTraceState(t *testing.T, args ...string) (stdout, stderr string, state *os.ProcessState, err error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), append([]string{"trace"}, transportBPF(args)...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(90 * time.Second * time.Duration(tracetest.TimeSlack)):
		cmd.Process.Kill()
		t.Fatalf("usdt-toolexec trace %s did not end\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.String(), errOut.String())
	}
	return out.String(), errOut.String(), cmd.ProcessState, err
}

// transportBPF returns trace's arguments args with -transport bpf first
// unless they choose a transport: as root, trace takes the ring where
// the binary has one, and the tests that do not say which transport
// they test are those of BPF (the kernels' VMs run them for that).
func transportBPF(args []string) []string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-transport" || strings.HasPrefix(a, "-transport=") {
			return args
		}
	}
	return append([]string{"-transport", "bpf"}, args...)
}

// traceAttached starts usdt-toolexec trace with args, -v among them, its
// events going to stdout, and returns it once it has said it attached,
// with that line and the rest of its stderr.
func traceAttached(t *testing.T, stdout io.Writer, args ...string) (*exec.Cmd, string, io.Reader) {
	t.Helper()
	tr, stderr := startTraceReading(t, stdout, transportBPF(args)...)
	line, err := stderr.ReadString('\n')
	if !strings.Contains(line, "attached") {
		rest, _ := io.ReadAll(stderr)
		t.Fatalf("usdt-toolexec trace -v did not say it attached (%v):\n%s%s", err, line, rest)
	}
	return tr, line, stderr
}

// startTraceReading starts usdt-toolexec trace with args, its stdout to
// stdout, and returns it with its stderr to read; it is killed when the
// test ends.
func startTraceReading(t *testing.T, stdout io.Writer, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	tr := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), append([]string{"trace"}, args...)...)
	tr.Stdout = stdout
	pipe, err := tr.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill() })
	return tr, bufio.NewReader(pipe)
}

// eventPrefix is what varies from run to run at the start of a line.
var eventPrefix = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{6} pid=\d+ tid=\d+ `)

func TestTraceTypes(t *testing.T) {
	requireAMD64(t)
	requireBPF(t)
	bin := build(t, fixture(t, "types"), route{name: "go", toolexec: true})
	out, errOut, err := usdtTrace(t, "-v", "--", bin, "once")
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "attached 6 probes") {
		t.Errorf("-v does not say how it attached:\n%s", errOut)
	}
	// Where: on amd64, the 1-byte NOPs the notes name, or, where the
	// kernel optimizes uprobes, the 5-byte NOPs after them; elsewhere the
	// notes' addresses, the only NOP there is.
	where := "at the notes' 1-byte NOPs"
	switch {
	case runtime.GOARCH != "amd64":
		where = "at the notes' addresses"
	case kernelOptimizesUprobes():
		where = "at the 5-byte NOPs"
	}
	if !strings.Contains(errOut, where) {
		t.Errorf("-v does not say it attached %s:\n%s", where, errOut)
	}
	ptr := regexp.MustCompile(`ptr=(0x[0-9a-f]+)`).FindStringSubmatch(errOut)
	if ptr == nil {
		t.Fatalf("the fixture printed no ptr=:\n%s", errOut)
	}
	checkTypes(t, out, typesEvents(ptr[1]))

	out, errOut, err = usdtTrace(t, "-json", "types:st*", "types:tw*", "--", bin, "once")
	if err != nil {
		t.Fatalf("trace -json: %v\n%s", err, errOut)
	}
	type event struct {
		Provider, Probe string
		PID, TID        int
		Time            time.Time
		Args            map[string]any
	}
	var events []event
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("-json output does not parse: %v\n%s", err, out)
		}
		events = append(events, e)
	}
	if len(events) != 2 || events[0].Probe != "strs" || events[1].Probe != "twelve" {
		t.Fatalf("-json events %+v, want strs and twelve", events)
	}
	if s := events[0].Args; len(s) != 4 || s["utf8"] != "héllo, 世界" {
		t.Errorf("strs args %q", s)
	}
	if a := events[1].Args; len(a) != 12 || a["a11"] != -11.0 {
		t.Errorf("twelve args %v", a)
	}
}

// typesEvents are the events of testdata/types, with the address
// the fixture printed as ptr: the values fire() passes in its main.go; a
// string is cut to 256 bytes, as the probe's copy is.
func typesEvents(ptr string) []string {
	return []string{
		"types:ints(a=-128, b=255, c=-32768, d=65535, e=-2147483648, f=4294967295)",
		"types:wide(a=-9223372036854775808, b=18446744073709551615, c=0xdeadbeef, t=true, f=false, p=" + ptr + ")",
		`types:strs(empty="", utf8="héllo, 世界", long300="` + strings.Repeat("0123456789", 30)[:256] + `", plain="plain")`,
		"types:chars(c=-5, s=-6, u=250, n=-7, o=1099511627776, x=9223372036854775808)",
		"types:twelve(a0=0, a1=-1, a2=2, a3=-3, a4=4, a5=-5, a6=6, a7=-7, a8=8, a9=-9, a10=10, a11=-11)",
		"types:tick()",
	}
}

// checkTypes compares trace's output, less each line's time, process and
// thread, with the events want.
func checkTypes(t *testing.T, out string, want []string) {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !eventPrefix.MatchString(line) {
			t.Errorf("line without time, pid and tid: %q", line)
		}
		got = append(got, eventPrefix.ReplaceAllString(line, ""))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("trace printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTraceTypesRing traces testdata/types through the in-process ring,
// as TestTraceTypes does through BPF: the same values, strings copied
// when the probe fires, and the probe of twelve arguments, four of them
// past the registers on amd64.
func TestTraceTypesRing(t *testing.T) {
	requireRing(t)
	bin := build(t, fixture(t, "types"), route{name: "go", toolexec: true})
	out, errOut, err := usdtTrace(t, "-v", "-transport", "ring", "--", bin, "once")
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	if strings.Contains(errOut, "not traced") {
		t.Errorf("trace leaves probes out:\n%s", errOut)
	}
	ptr := regexp.MustCompile(`ptr=(0x[0-9a-f]+)`).FindStringSubmatch(errOut)
	if ptr == nil {
		t.Fatalf("the fixture printed no ptr=:\n%s", errOut)
	}
	checkTypes(t, out, typesEvents(ptr[1]))
}

// testTrace traces automatic probes, in a position-dependent and a
// position-independent executable.
func (a *auto) testTrace(t *testing.T) {
	requireBPF(t)
	for _, variant := range []string{"inst", "inst-pie"} {
		t.Run(variant, func(t *testing.T) { traceDemo(t, a.bin(t, variant)) })
	}
}

func traceDemo(t *testing.T, bin string) {
	requireTraceable(t, bin)
	out, errOut, err := usdtTrace(t, "-latency", "orders.Check", "orders.Cents.Minus", "--", bin, "demo")
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	// The goroutine ids the fixture prints for itself and for the
	// goroutines that call Minus.
	mainG := regexp.MustCompile(`store=\S+ gid=(\d+)`).FindStringSubmatch(errOut)
	minus := regexp.MustCompile(`minus d=(\d+) gid=(\d+) result=(-?\d+)`).FindAllStringSubmatch(errOut, -1)
	if mainG == nil || len(minus) != 3 {
		t.Fatalf("the fixture did not print its goroutine ids:\n%s", errOut)
	}
	want := []string{
		"g=" + mainG[1] + " orders.Cents.Minus(c=100, d=250)",
		"g=" + mainG[1] + " orders.Cents.Minus = (r1=-150) ELAPSED",
	}
	for _, m := range minus {
		want = append(want,
			"g="+m[2]+" orders.Cents.Minus(c=5, d="+m[1]+")",
			"g="+m[2]+" orders.Cents.Minus = (r1="+m[3]+") ELAPSED")
	}
	want = append(want,
		"g="+mainG[1]+` orders.Check(arg1="gift wrap", limit=12, arg3=true)`,
		"g="+mainG[1]+" orders.Check = (r1=true, err=<nil>) ELAPSED")
	events, hist, _ := strings.Cut(out, "\n\n")
	clock := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{6} `)
	elapsed := regexp.MustCompile(` [0-9.]+(ns|µs|ms|s)$`)
	var got []string
	for _, line := range strings.Split(events, "\n") {
		if !clock.MatchString(line) {
			t.Errorf("line without its time: %q", line)
		}
		got = append(got, elapsed.ReplaceAllString(clock.ReplaceAllString(line, ""), " ELAPSED"))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("trace printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{"orders.Cents.Minus: 4 calls", "orders.Check: 1 calls"} {
		if !strings.Contains(hist, w) {
			t.Errorf("-latency output lacks %q:\n%s", w, hist)
		}
	}
}

func TestTraceErrors(t *testing.T) {
	requireAMD64(t)
	requireBPF(t)
	plain := filepath.Join(t.TempDir(), "true")
	copyFile(t, "/bin/true", plain)
	probed := buildFixtureRules(t, "unmapped")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no probes", []string{"--", plain}, plain + " has no USDT probes (build it with usdtgen probes"},
		{"no match", []string{"nothing.*", "--", probed, "out"}, "no probe matches nothing.* (usdt-toolexec list BINARY shows them)"},
		{"bad pattern", []string{"[", "--", probed, "out"}, `pattern "[": syntax error in pattern`},
		{"bad attach", []string{"-attach", "both", "--", plain}, "-attach both: want multi, single or auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, err := usdtTrace(t, tt.args...)
			if err == nil || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || strings.Contains(errOut, "goroutine ") {
				t.Errorf("err %v, stderr %q: want one line with %q", err, errOut, tt.want)
			}
		})
	}
}

// TestTraceUnprivileged runs trace -transport bpf as the unprivileged user
// nobody: it must say in one line what it needs. (Without -transport,
// nobody's trace records in the process: TestRingProviderUnprivileged.)
func TestTraceUnprivileged(t *testing.T) {
	requireAMD64(t)
	requireBPF(t) // root, so it can become nobody
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		tracetest.SkipMissing(t, "setpriv (util-linux) is not installed: cannot drop root to run trace unprivileged (scripts/setup.sh)")
	}
	// A directory nobody can enter, with copies of usdt-toolexec and of
	// a program with probes.
	jobs := buildJobs(routeA)(t)
	dir := tracetest.NobodyDir(t)
	bin, prog := filepath.Join(dir, "usdt-toolexec"), filepath.Join(dir, "jobs")
	copyFile(t, filepath.Join(toolsDir, "usdt-toolexec"), bin)
	copyFile(t, jobs, prog)
	for _, f := range []string{bin, prog} {
		if err := os.Chmod(f, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin, "trace", "-transport", "bpf", "--", prog, "-jobs", "1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	want := "tracing needs root or CAP_BPF and CAP_PERFMON (run it with sudo)"
	if err == nil || !strings.Contains(string(out), want) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Errorf("as nobody: err %v, output %q: want one line with %q", err, out, want)
	}
}

// TestTracePIDExit traces a running process with -p: trace must end
// within a second of the process's exit, with the -latency histogram of
// the calls it saw, or with -stats their counts.
func TestTracePIDExit(t *testing.T) {
	requireAMD64(t)
	// The program waits for a line on stdin, so that it calls work only
	// once trace has attached.
	bin := buildMain(t, "pidexit", pidExitProgram)
	for _, tt := range []struct {
		flag  string
		check func(t *testing.T, out string)
	}{
		{"-latency", func(t *testing.T, out string) {
			events, hist, _ := strings.Cut(out, "\n\n")
			if n := strings.Count(events, " main.work = (r1="); n != 5 {
				t.Errorf("trace printed %d exits of main.work, want 5:\n%s", n, out)
			}
			if !regexp.MustCompile(`(?m)^main\.work: 5 calls\n  \[`).MatchString(hist) {
				t.Errorf("-latency printed no histogram of 5 calls of main.work:\n%s", out)
			}
		}},
		{"-stats", func(t *testing.T, out string) {
			if !regexp.MustCompile(`^main\.work: 5 calls, total \S+, mean \S+\n  \[`).MatchString(out) {
				t.Errorf("-stats printed no counts of 5 calls of main.work:\n%s", out)
			}
		}},
	} {
		if tt.flag != "-stats" && guestDir != "" {
			continue // the same exit, printed another way
		}
		t.Run(tt.flag[1:], func(t *testing.T) {
			eachTransport(t, func(t *testing.T, transport string) { tracePIDExit(t, bin, transport, tt.flag, tt.check) })
		})
	}
}

// tracePIDExit runs bin, traces it through transport with -p and flag,
// and lets it work: trace must end within a second of its exit, its
// output as check wants.
func tracePIDExit(t *testing.T, bin, transport, flag string, check func(t *testing.T, out string)) {
	prog, in, _ := startReady(t, bin)

	var out bytes.Buffer
	tr, _, trErr := traceAttached(t, &out, "-v", "-transport", transport, flag, "-p", fmt.Sprint(prog.Process.Pid))
	var errOut strings.Builder
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&errOut, trErr)
	}()
	fmt.Fprintln(in, "go")
	if err := prog.Wait(); err != nil {
		t.Fatalf("the program: %v", err)
	}
	exited := time.Now()
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	select {
	case err := <-done:
		d := time.Since(exited)
		if d > time.Second {
			t.Errorf("trace ended %v after the process, want within a second", d)
		}
		t.Logf("trace ended %v after the process", d)
		<-copied
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("trace -p did not end in 10 s after the process exited\nstdout:\n%s", out.String())
	}
	check(t, out.String())
}

// TestTraceInterruptBusy interrupts a trace of a program that fires its
// probe as fast as four goroutines can: trace must end soon after, not
// once the program has (it would drain a buffer the program keeps
// filling while still attached).
func TestTraceInterruptBusy(t *testing.T) {
	requireAMD64(t)
	bin := buildMain(t, "busy", busyProgram)
	prog := start(t, bin)
	prog.expect(t, "ready", 10*time.Second*time.Duration(tracetest.TimeSlack))
	eachTransport(t, func(t *testing.T, transport string) { interruptBusy(t, prog.cmd.Process.Pid, transport) })
}

// interruptBusy traces the busy program of pid through transport and
// interrupts the trace. Through the ring, trace then prints what the
// program recorded before: with a large backlog it says so, and a second
// interrupt drops the rest, which trace counts.
func interruptBusy(t *testing.T, pid int, transport string) {
	tr, _, trErr := traceAttached(t, io.Discard, "-v", "-transport", transport, "-p", fmt.Sprint(pid))
	printing := make(chan struct{})
	var log strings.Builder
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		lines := bufio.NewScanner(trErr)
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
			if strings.Contains(lines.Text(), "interrupt again to drop them") {
				close(printing)
			}
		}
	}()
	// Long enough for the program to fill the ring buffer.
	time.Sleep(3 * time.Second)
	tr.Process.Signal(os.Interrupt)
	interrupted := time.Now()
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	if transport == "ring" {
		select {
		case <-printing:
			tr.Process.Signal(os.Interrupt)
		case <-time.After(2 * time.Second * time.Duration(tracetest.TimeSlack)):
		}
	}
	select {
	case err := <-done:
		t.Logf("trace ended %v after the interrupt", time.Since(interrupted))
		if err != nil {
			t.Errorf("trace: %v", err)
		}
		<-logged
		if transport == "ring" && strings.Contains(log.String(), "interrupt again to drop them") && !regexp.MustCompile(`dropped \d+ events recorded before the end`).MatchString(log.String()) {
			t.Errorf("trace did not count the events it dropped at the second interrupt:\n%s", log.String())
		}
	case <-time.After(5 * time.Second * time.Duration(tracetest.TimeSlack)):
		t.Fatalf("trace did not end %v after an interrupt while the program fires", 5*time.Second*time.Duration(tracetest.TimeSlack))
	}
}

// TestTraceCommandOnly traces a command while another process of the same
// binary runs, through BPF and through the ring: trace shows the events
// of the command and of the child it starts, and none of the other
// process's. It exits as the command did, as a shell does for one a
// signal killed.
func TestTraceCommandOnly(t *testing.T) {
	requireAMD64(t)
	bin := buildMain(t, "family", familyProgram)
	other := start(t, bin, "other")
	other.expect(t, "ready", 10*time.Second)
	eachTransport(t, func(t *testing.T, transport string) { testCommandOnly(t, bin, transport, other.cmd.Process.Pid) })
}

func testCommandOnly(t *testing.T, bin, transport string, other int) {
	out, errOut, err := usdtTrace(t, "-json", "-transport", transport, "main.mark", "--", bin, "parent")
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	pids := map[string]map[int]int{} // who -> pid -> calls
	for _, e := range parseTraceJSON(t, out) {
		if e.Args == nil {
			continue
		}
		if len(e.Args) != 2 || e.Args[0].Key != "who" {
			t.Fatalf("main.mark with arguments %v, want who and i", e.Args)
		}
		who, _ := e.Args[0].Value.(string)
		if pids[who] == nil {
			pids[who] = map[int]int{}
		}
		pids[who][e.PID]++
	}
	two := func(who string) int {
		for pid, n := range pids[who] {
			if n == 2 && len(pids[who]) == 1 {
				return pid
			}
		}
		return 0
	}
	if parent, child := two("parent"), two("child"); len(pids) != 2 || parent == 0 || child == 0 || parent == child {
		t.Errorf("calls of main.mark by caller and pid %v: want 2 by the parent, 2 by its child in a process of its own, none by the other process (pid %d)\n%s", pids, other, out)
	}
	// Still running (not a zombie), it has marked every millisecond all
	// along.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", other))
	if _, state, _ := strings.Cut(string(stat), ") "); err != nil || strings.HasPrefix(state, "Z") {
		t.Errorf("the other process ended while traced: %v %s", err, stat)
	}

	out, errOut, err = usdtTrace(t, "-transport", transport, "main.mark", "--", bin, "killed")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGTERM) || !strings.Contains(out, `main.mark(who="killed"`) {
		t.Errorf("trace of a command that SIGTERM killed: %v, want exit status 143, and its event\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// TestTraceLatencyColumns checks that -latency keeps its columns aligned
// when bucket labels are wide: calls of a few nanoseconds and of a few
// hundred microseconds and milliseconds ("[1.048576ms, 2.097152ms)").
func TestTraceLatencyColumns(t *testing.T) {
	requireAMD64(t)
	bin := buildMain(t, "columns", columnsProgram)
	eachTransport(t, func(t *testing.T, transport string) { testLatencyColumns(t, bin, transport) })
}

func testLatencyColumns(t *testing.T, bin, transport string) {
	out, errOut, err := usdtTrace(t, "-transport", transport, "-latency", "main.wait", "--", bin)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	_, hist, _ := strings.Cut(out, "\n\n")
	var bar, end []int // where each row's bar starts and ends, in characters
	wide := false
	for _, line := range strings.Split(strings.TrimSpace(hist), "\n") {
		if !strings.HasPrefix(line, "  [") {
			continue
		}
		bucket, _, _ := strings.Cut(strings.TrimSpace(line), ")")
		wide = wide || utf8.RuneCountInString(bucket) >= 22
		bar = append(bar, utf8.RuneCountInString(line[:strings.IndexByte(line, '|')]))
		end = append(end, utf8.RuneCountInString(line))
	}
	if !strings.HasPrefix(hist, "main.wait: 6 calls\n") || len(bar) < 3 || !wide {
		t.Fatalf("-latency printed no histogram of 6 calls with buckets of wide labels:\n%s", hist)
	}
	for i := range bar {
		if bar[i] != bar[0] || end[i] != end[0] {
			t.Errorf("the histogram's columns drift: bars start at %v and end at %v:\n%s", bar, end, hist)
			break
		}
	}
}

// pidExitProgram is the program of the test that builds it as pidexit.
// Its argument "exec" has it run a shell that exits with 7 at the end,
// in its place (TestRingExec).
const pidExitProgram = `package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func work(i int) int { return i * 2 }

func main() {
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	sum := 0
	for i := range 5 {
		sum += work(i)
	}
	fmt.Println("sum", sum)
	// A ring trace of -p reads the process at its polls, and what it
	// records after the last goes with it: a second and a half, and
	// more under emulation (` + tracetest.TimeSlackEnv + `), where a poll
	// comes later.
	slack, _ := strconv.Atoi(os.Getenv("` + tracetest.TimeSlackEnv + `"))
	time.Sleep(time.Duration(max(slack/5, 1)) * 1500 * time.Millisecond)
	if len(os.Args) > 1 && os.Args[1] == "exec" {
		err := syscall.Exec("/bin/sh", []string{"sh", "-c", "sleep 0.5; exit 7"}, os.Environ())
		fmt.Println(err)
		os.Exit(1)
	}
}
`

// busyProgram fires main.leaf from four goroutines for a minute.
const busyProgram = `package main

import (
	"fmt"
	"sync"
	"time"
)

func leaf(i int) int { return i * 3 }

func main() {
	fmt.Println("ready")
	end := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				leaf(i)
			}
		})
	}
	wg.Wait()
}
`

// familyProgram is the program of the test that builds it as family.
const familyProgram = `package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

func mark(who string, i int) int { return i }

func main() {
	switch os.Args[1] {
	case "other":
		fmt.Println("ready")
		for i := 0; ; i++ {
			mark("other", i)
			time.Sleep(time.Millisecond)
		}
	case "parent":
		mark("parent", 0)
		child := exec.Command(os.Args[0], "child")
		child.Stderr = os.Stderr
		if err := child.Run(); err != nil {
			panic(err)
		}
		mark("parent", 1)
	case "child":
		// A mark from a thread of the child's other than its first,
		// and time for the other process to mark while traced.
		done := make(chan int)
		go func() { done <- mark("child", 0) }()
		<-done
		time.Sleep(100 * time.Millisecond)
		mark("child", 1)
	case "shell":
		// The child through a shell: a process of another executable
		// between the two.
		mark("shell", 0)
		child := exec.Command("/bin/sh", "-c", os.Args[0]+" child; true")
		child.Stderr = os.Stderr
		if err := child.Run(); err != nil {
			panic(err)
		}
	case "brood":
		// Children, all alive at once: each marks, waits for the
		// others to start, and marks again.
		n, _ := strconv.Atoi(os.Args[2])
		children := make([]*exec.Cmd, n)
		for i := range children {
			children[i] = exec.Command(os.Args[0], "member", strconv.Itoa(i))
			children[i].Stderr = os.Stderr
			if err := children[i].Start(); err != nil {
				panic(err)
			}
		}
		for _, c := range children {
			if err := c.Wait(); err != nil {
				panic(err)
			}
		}
	case "member":
		for i := range 500 {
			mark(os.Args[2], i)
		}
		time.Sleep(500 * time.Millisecond)
		for i := range 500 {
			mark(os.Args[2], i)
		}
	case "killed":
		mark("killed", 0)
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(time.Minute)
	}
}
`

// columnsProgram is the program of the test that builds it as columns.
const columnsProgram = `package main

import "time"

func wait(d time.Duration) time.Duration {
	if d > 0 {
		time.Sleep(d)
	}
	return d
}

func main() {
	for _, d := range []time.Duration{0, 0, 0, 300 * time.Microsecond, 1500 * time.Microsecond, 3 * time.Millisecond} {
		wait(d)
	}
}
`
