package e2e

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// The automatic probes that usdt-toolexec -rules inserts, checked on
// testdata/auto: an order service (package main, package orders and a cgo
// package cprice with its own command cgoshop) and the rules that select
// some of its functions. Every expected value below is written from the
// fixture's source, not from the tool's output.

// autoFuncs are the functions testdata/auto/rules.yml selects in the auto
// command, as "pkg.Func" or "pkg.Type.Method": each has an entry__ and an
// exit__ probe except autoEntryOnly.
var autoFuncs = []string{
	// orders: every function but *.String, Store.deliver, init (never),
	// the nosplit mix, the bodyless monoNow and the blank func.
	"orders.Cents.Minus", "orders.Order.Total", "orders.NewStore",
	"orders.Store.Place", "orders.Store.Reserve", "orders.Store.Ship",
	"orders.Sum", "orders.Queue.Push", "orders.Queue.Len", "orders.Tag",
	"orders.Check", "orders.FindBin", "orders.SplitBill", "orders.Tax",
	"orders.ForEach", "orders.Mix", "orders.Echo",
	// main: nopNotifier.*, and [a-z]* but main and goid; no tally method,
	// no init.
	"main.nopNotifier.Notify", "main.audit", "main.tryReserve", "main.settle",
	"main.demo", "main.ship", "main.runCrash", "main.nap", "main.descend",
	"main.panicky", "main.rescue", "main.latency", "main.spread",
	"main.brittle", "main.shield",
}

// autoEntryOnly is rules.yml's "probes: [entry]" rule.
const autoEntryOnly = "main.logf"

// autoNever are functions of the fixture that must have no probe, for
// clearer failure messages.
var autoNever = map[string]string{
	"orders.Status.String": "excluded by *.String",
	"orders.Order.String":  "excluded by *.String",
	"orders.Store.deliver": "excluded by Store.deliver",
	"orders.init":          "init is never instrumented",
	"orders.mix":           "//go:nosplit is never instrumented",
	"orders.monoNow":       "a function without body is never instrumented",
	"main.main":            "excluded by main",
	"main.goid":            "excluded by goid",
	"main.init":            "init is never instrumented",
	"main.tally.add":       "no rule selects methods of tally",
}

func autoProbe(kind, fn string) string {
	pkg, name, _ := strings.Cut(fn, ".")
	return autoprobe.Name(kind, pkg, name)
}

// autoWantProbes is the exact set of probes of the auto command.
func autoWantProbes() map[string]bool {
	want := map[string]bool{autoProbe("entry", autoEntryOnly): true}
	for _, fn := range autoFuncs {
		want[autoProbe("entry", fn)] = true
		want[autoProbe("exit", fn)] = true
	}
	return want
}

// auto is the fixture of one TestAuto run and the binaries built from it,
// each built once, when a subtest first needs it.
type auto struct {
	dir   string // the fixture module
	out   string // where binaries go
	rules string // dir/rules.yml
	memo  map[string]memoized
	// buildOutput is what go build printed for each variant a.bin built.
	buildOutput map[string]string
	target      target
}

type memoized struct {
	val string
	err error
}

// once runs f the first time key is asked for and returns its result every
// time.
func (a *auto) once(key string, f func() (string, error)) (string, error) {
	if m, ok := a.memo[key]; ok {
		return m.val, m.err
	}
	val, err := f()
	a.memo[key] = memoized{val, err}
	return val, err
}

func (a *auto) must(t *testing.T, key string, f func() (string, error)) string {
	t.Helper()
	val, err := a.once(key, f)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return val
}

func (a *auto) toolexec(flags ...string) string {
	return "-toolexec=" + strings.Join(append([]string{wrapperBin()}, flags...), " ")
}

// goBuild runs go build in dir and returns the binary and the output.
func (a *auto) goBuild(dir, name string, cgo bool, args ...string) (bin, out string, err error) {
	bin = filepath.Join(a.out, name)
	cgoEnv := "CGO_ENABLED=0"
	if cgo {
		cgoEnv = "CGO_ENABLED=1"
	}
	out, err = goRun(dir, append(a.target.env(), cgoEnv), append([]string{"build", "-o", bin}, args...)...)
	if err != nil {
		return "", out, fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, out, nil
}

// bin returns one of the auto command's builds, all with CGO_ENABLED=0:
// inst (rules.yml), plain (no wrapper), verbose (-v, rules-verbose.yml),
// inst-noinline and plain-noinline (no inlining in the fixture), and
// inst-pie (-buildmode=pie).
func (a *auto) bin(t *testing.T, variant string) string {
	t.Helper()
	if guestDir != "" {
		return prebuilt(t, "auto", variant)
	}
	return a.must(t, "build "+variant, func() (string, error) {
		var args []string
		switch variant {
		case "inst":
			args = []string{a.toolexec("-rules", a.rules)}
		case "plain":
		case "inst-pie":
			args = []string{a.toolexec("-rules", a.rules), "-buildmode=pie"}
		case "inst-noinline":
			args = []string{a.toolexec("-rules", a.rules), "-gcflags=example.com/auto/...=-l"}
		case "plain-noinline":
			args = []string{"-gcflags=example.com/auto/...=-l"}
		case "verbose":
			args = []string{a.toolexec("-v", "-rules", filepath.Join(a.dir, "rules-verbose.yml"))}
		default:
			panic(variant)
		}
		bin, out, err := a.goBuild(a.dir, variant, false, append(args, ".")...)
		a.buildOutput[variant] = out
		return bin, err
	})
}

func TestAuto(t *testing.T) {
	requireAMD64(t)
	a := &auto{dir: userModule(t, "auto", "example.com/auto"), out: t.TempDir(), memo: map[string]memoized{}, buildOutput: map[string]string{}}
	a.rules = filepath.Join(a.dir, "rules.yml")
	// The attach checks run in the VMs of TestKernels too, the others
	// need the build of the moment.
	// Where each runs: on every machine of TestKernels ("kernel"), on
	// those of another architecture too ("arch"), or on the host alone
	// ("host": the script bt writes is the host's work, the exit-only
	// attach the kernel's semaphores', TestSemaphoreGating's).
	attach := []struct {
		name, where string
		test        func(*testing.T)
	}{
		{"Arguments", "kernel", func(t *testing.T) { eachBpftrace(t, a.testArguments) }},
		{"ExitOnly", "host", func(t *testing.T) { eachBpftrace(t, a.testExitOnly) }},
		{"GoroutineIDs", "arch", func(t *testing.T) { eachBpftrace(t, a.testGoroutineIDs) }},
		{"LatencyPairing", "arch", func(t *testing.T) { eachBpftrace(t, a.testLatencyPairing) }},
		{"Elapsed", "arch", func(t *testing.T) { eachBpftrace(t, a.testElapsed) }},
		{"BtScript", "host", func(t *testing.T) { eachBpftrace(t, a.testBtScript) }},
		{"Trace", "kernel", a.testTrace},
	}
	if guestDir == "" {
		t.Run("ProbeList", a.testProbeList)
		t.Run("SiteNops", a.testSiteNops)
	}
	for _, s := range attach {
		if guestDir == "" || s.where == "kernel" || s.where == "arch" && !kernelOnly() {
			t.Run(s.name, s.test)
		}
	}
	if guestDir != "" {
		return
	}
	t.Run("Verbose", a.testVerbose)
	t.Run("TooManyArgs", a.testTooManyArgs)
	t.Run("Positions", func(t *testing.T) {
		t.Run("StackTrace", a.testStackTrace)
		t.Run("DWARF", a.testDWARF)
		t.Run("Cover", a.testCover)
	})
	t.Run("Reproducible", a.testReproducible)
	t.Run("Cgo", a.testCgo)
}

// bpftraceList returns the probes bpftrace -l lists in bin, as
// provider:name.
func bpftraceList(t *testing.T, bt tracetest.Bpftrace, bin string) []string {
	t.Helper()
	bt.Require(t)
	out, err := bt.Output(60*time.Second, "", "-l", "usdt:"+bin+":*")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		p, ok := strings.CutPrefix(line, "usdt:"+bin+":")
		if !ok {
			t.Errorf("bpftrace -l printed %q", line)
			continue
		}
		got = append(got, p)
	}
	return got
}

// checkProbeSet compares provider:name lists with the wanted names.
func checkProbeSet(t *testing.T, who string, got []string, provider string, want map[string]bool) {
	t.Helper()
	seen := map[string]int{}
	for _, p := range got {
		prov, name, _ := strings.Cut(p, ":")
		if prov != provider {
			t.Errorf("%s: probe %s has provider %q, want %q", who, p, prov, provider)
		}
		seen[name]++
		if !want[name] {
			why := "not selected by the rules"
			_, pkg, fn, _ := autoprobe.Split(name)
			if r, ok := autoNever[autoprobe.Label(pkg, fn, "")]; ok {
				why = r
			}
			t.Errorf("%s lists %s: %s", who, p, why)
		}
	}
	for name := range want {
		if seen[name] != 1 {
			t.Errorf("%s lists %s:%s %d times, want once", who, provider, name, seen[name])
		}
	}
}

// Every site of automatic probes holds the NOP the kernel optimizes, in a
// position-dependent and a position-independent binary (the cgo build is
// checked in testCgo).
func (a *auto) testSiteNops(t *testing.T) {
	for _, v := range []string{"inst", "inst-pie"} {
		t.Run(v, func(t *testing.T) { checkSiteNops(t, a.bin(t, v)) })
	}
}

// 1. The probes are exactly those of the selected functions.
func (a *auto) testProbeList(t *testing.T) {
	bin := a.bin(t, "inst")
	want := autoWantProbes()
	if len(want) != 65 {
		t.Fatalf("the expected list has %d probes, want 65 (32 functions with two, one with an entry only)", len(want))
	}
	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		checkProbeSet(t, "bpftrace -l", bpftraceList(t, bt, bin), "shop", want)
	})
	var fromNotes []string
	for _, n := range readelfNotes(t, bin) {
		fromNotes = append(fromNotes, n.provider+":"+n.name)
		for field, v := range map[string]string{"pc": n.pc, "base": n.base, "semaphore": n.semaphore} {
			if x, err := strconv.ParseUint(v, 0, 64); err != nil || x == 0 {
				t.Errorf("%s: %s is %q, want non-zero", n.name, field, v)
			}
		}
	}
	checkProbeSet(t, "readelf -n", fromNotes, "shop", want)
}

// autoDemoScript prints the arguments of the probes auto demo fires. %ld
// and %lu: bpftrace 0.17's %d is 32 bits. Only arg0-arg5 are readable.
const autoDemoScript = `
usdt:BIN:shop:entry__orders__Store__Place { printf("P entry Place g=%ld recv=%lx cust=%s qty=%ld price=%ld rush=%lu\n", arg0, arg1, str(arg2), arg3, arg4, arg5); }
usdt:BIN:shop:exit__orders__Store__Place { printf("P exit Place g=%ld order=%lx errnil=%d\n", arg0, arg2, *(uint64 *)uptr(arg3) == 0); }
usdt:BIN:shop:entry__orders__Order__Total { printf("P entry Total g=%ld recv.Qty=%d discount=%lu\n", arg0, *(int8 *)uptr(arg1 + 24), arg2); }
usdt:BIN:shop:exit__orders__Order__Total { printf("P exit Total g=%ld r=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__orders__Cents__Minus { printf("P entry Minus g=%ld c=%ld d=%ld\n", arg0, arg1, arg2); }
usdt:BIN:shop:exit__orders__Cents__Minus { printf("P exit Minus g=%ld r=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__orders__Sum { printf("P entry Sum g=%ld len=%ld xs[0]=%ld start=%ld\n", arg0, *(int64 *)uptr(arg1 + 8), *(int64 *)uptr(*(uint64 *)uptr(arg1)), *(int64 *)uptr(*(uint64 *)uptr(arg2 + 8))); }
usdt:BIN:shop:exit__orders__Sum { printf("P exit Sum g=%ld r=%ld\n", arg0, *(int64 *)uptr(*(uint64 *)uptr(arg2 + 8))); }
usdt:BIN:shop:entry__orders__Queue__Push { $v = *(uint64 *)uptr(arg2 + 8); printf("P entry Push g=%ld q=%lx v=%r\n", arg0, arg1, buf(*(uint64 *)uptr($v), *(int64 *)uptr($v + 8))); }
usdt:BIN:shop:exit__orders__Queue__Push { printf("P exit Push g=%ld r=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__orders__Queue__Len { printf("P entry Len g=%ld len(q.items)=%lu\n", arg0, *(uint64 *)uptr(arg1 + 8)); }
usdt:BIN:shop:exit__orders__Queue__Len { printf("P exit Len g=%ld r=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__orders__Tag { printf("P entry Tag g=%ld prefix=%s codes=%ld\n", arg0, str(arg1), *(int64 *)uptr(arg2 + 8)); }
usdt:BIN:shop:exit__orders__Tag { printf("P exit Tag g=%ld r=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__orders__Check { printf("P entry Check g=%ld s=%s limit=%ld b=%lu\n", arg0, str(arg1), arg2, arg3); }
usdt:BIN:shop:exit__orders__Check { printf("P exit Check g=%ld r=%lu errnil=%d\n", arg0, arg2, *(uint64 *)uptr(arg3) == 0); }
usdt:BIN:shop:entry__main__nopNotifier__Notify { printf("P entry Notify g=%ld recv=%d who=%s id=%ld\n", arg0, arg1 != 0, str(arg2), arg3); }
usdt:BIN:shop:exit__main__nopNotifier__Notify { printf("P exit Notify g=%ld r=%ld errnil=%d\n", arg0, arg2, *(uint64 *)uptr(arg3) == 0); }
usdt:BIN:shop:entry__orders__FindBin { printf("P entry FindBin g=%ld bins=%ld need=%ld\n", arg0, *(int64 *)uptr(arg1 + 8), arg2); }
usdt:BIN:shop:exit__orders__FindBin { printf("P exit FindBin g=%ld row=%ld col=%ld\n", arg0, arg2, arg3); }
usdt:BIN:shop:entry__orders__SplitBill { printf("P entry SplitBill g=%ld total=%ld people=%ld\n", arg0, arg1, arg2); }
usdt:BIN:shop:exit__orders__SplitBill { printf("P exit SplitBill g=%ld share=%ld errnil=%d\n", arg0, arg2, *(uint64 *)uptr(arg3) == 0); }
usdt:BIN:shop:entry__orders__Store__Reserve { printf("P entry Reserve g=%ld item=%s n=%ld\n", arg0, str(arg2), arg3); }
usdt:BIN:shop:exit__orders__Store__Reserve { printf("P exit Reserve g=%ld left=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__main__tryReserve { printf("P entry tryReserve g=%ld item=%s n=%ld\n", arg0, str(arg2), arg3); }
usdt:BIN:shop:exit__main__tryReserve { printf("P exit tryReserve g=%ld left=%ld ok=%lu\n", arg0, arg2, arg3); }
usdt:BIN:shop:entry__orders__Tax { printf("P entry Tax g=%ld amount=%lx rate=%lx\n", arg0, arg1, arg2); }
usdt:BIN:shop:exit__orders__Tax { printf("P exit Tax g=%ld r=%lx\n", arg0, arg2); }
usdt:BIN:shop:entry__main__audit { printf("P entry audit g=%ld %ld %ld %ld %ld %ld\n", arg0, arg1, arg2, arg3, arg4, arg5); }
usdt:BIN:shop:exit__main__audit { printf("P exit audit g=%ld r=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__orders__Echo { printf("P entry Echo g=%ld err=%lx v=%lx\n", arg0, *(uint64 *)uptr(arg1), *(uint64 *)uptr(arg2)); }
usdt:BIN:shop:exit__orders__Echo { printf("P exit Echo g=%ld err=%lx v=%lx\n", arg0, *(uint64 *)uptr(arg2), *(uint64 *)uptr(arg3)); }
usdt:BIN:shop:entry__main__logf { @logf = count(); }
`

// autoDemoWant is what bpftrace must print for auto demo. G is the main
// goroutine's id, STORE, ORDER and QUEUE the pointers the program prints.
var autoDemoWant = []string{
	// Pointer receiver; a negative int8, a bool, a string; results: a
	// pointer and an error (nil is 0).
	"P entry Place g=G recv=STORE cust=bob qty=-3 price=450 rush=0",
	"P exit Place g=G order=0 errnil=0",
	"P entry Place g=G recv=STORE cust=alice qty=2 price=1250 rush=1",
	"P exit Place g=G order=ORDER errnil=1",
	// Value receiver of struct type: 0; a uint8. 1250*2-200.
	"P entry Total g=G recv.Qty=2 discount=200",
	"P exit Total g=G r=2300",
	// Value receiver of a basic type.
	"P entry Minus g=G c=100 d=250",
	"P exit Minus g=G r=-150",
	// Generic function: a slice is the address of its header, whose
	// first word points to its elements and second is its length; a T
	// the address of an interface{} holding it, whose data word points
	// to the value.
	"P entry Sum g=G len=3 xs[0]=1 start=10",
	"P exit Sum g=G r=16",
	// Methods of a generic type.
	"P entry Push g=G q=QUEUE v=first",
	"P entry Push g=G q=QUEUE v=second",
	"P exit Push g=G r=1",
	"P exit Push g=G r=2",
	"P entry Len g=G len(q.items)=2",
	"P exit Len g=G r=2",
	// Variadic: the variadic parameter is a slice, read as any other.
	"P entry Tag g=G prefix=vip codes=3",
	"P exit Tag g=G r=2",
	// Blank parameters and a blank result keep their values and places.
	"P entry Check g=G s=gift wrap limit=12 b=1",
	"P exit Check g=G r=1 errnil=1",
	// Unnamed receiver, parameters and results.
	"P entry Notify g=G recv=1 who=carol id=-42",
	"P exit Notify g=G r=-1 errnil=1",
	// Labels and goto: bins[1][1] = 9 is the first with room for 4.
	"P entry FindBin g=G bins=2 need=4",
	"P exit FindBin g=G row=1 col=1",
	// A recovered panic: the exit probe sees the results recover set.
	"P entry SplitBill g=G total=1000 people=4",
	"P exit SplitBill g=G share=250 errnil=1",
	"P entry SplitBill g=G total=1000 people=0",
	"P exit SplitBill g=G share=-1 errnil=0",
	// A panic unwinding through Reserve (left still 0), recovered by its
	// caller tryReserve.
	"P entry tryReserve g=G item=tea n=2",
	"P entry Reserve g=G item=tea n=2",
	"P exit Reserve g=G left=3",
	"P exit tryReserve g=G left=3 ok=1",
	"P entry tryReserve g=G item=cup n=3",
	"P entry Reserve g=G item=cup n=3",
	"P exit Reserve g=G left=0",
	"P exit tryReserve g=G left=-1 ok=0",
	// Floats as raw IEEE bits: 1.5, float32 0.25, 0.375.
	"P entry Tax g=G amount=3ff8000000000000 rate=3e800000",
	"P exit Tax g=G r=3fd8000000000000",
	// The first five of fourteen int16 parameters; their sum.
	"P entry audit g=G 1 -2 3 -4 5",
	"P exit audit g=G r=-7",
	// logf runs 25 times: 24 calls in demo, one in main.
	"@logf: 25",
}

var (
	autoStoreLine = regexp.MustCompile(`(?m)^store=0x([0-9a-f]+) gid=(\d+)$`)
	autoOrderLine = regexp.MustCompile(`(?m)^place alice order=0x([0-9a-f]+) err=<nil>$`)
	autoQueueLine = regexp.MustCompile(`(?m)^queue=0x([0-9a-f]+)$`)
)

// demoTrace runs auto demo under autoDemoScript.
func (a *auto) demoTrace(t *testing.T, bt tracetest.Bpftrace) string {
	t.Helper()
	bt.RequireAttach(t)
	bin := a.bin(t, "inst")
	return a.must(t, "demo trace with "+bt.Name, func() (string, error) {
		script := strings.ReplaceAll(autoDemoScript, "BIN", bin)
		return bt.Output(90*time.Second, "", "-e", script, "-c", bin+" demo")
	})
}

// 2. Arguments and results of every kind of function.
func (a *auto) testArguments(t *testing.T, bt tracetest.Bpftrace) {
	out := a.demoTrace(t, bt)
	store, order, queue := autoStoreLine.FindStringSubmatch(out), autoOrderLine.FindStringSubmatch(out), autoQueueLine.FindStringSubmatch(out)
	if store == nil || order == nil || queue == nil {
		t.Fatalf("auto demo did not print its pointers and goroutine id:\n%s", out)
	}
	r := strings.NewReplacer("g=G", "g="+store[2], "STORE", store[1], "ORDER", order[1], "QUEUE", queue[1])
	for _, w := range autoDemoWant {
		if w = r.Replace(w); !strings.Contains(out, w+"\n") {
			t.Errorf("bpftrace did not print %q", w)
		}
	}
	// An error and an any, passed as their addresses: the type words
	// read there (*errors.errorString, int) are non-zero, distinct, and
	// the same at entry and exit, although the entry probe passes the
	// parameters' addresses and the exit probe the results'.
	echo := regexp.MustCompile(`(?m)^P (entry|exit) Echo g=\d+ err=([0-9a-f]+) v=([0-9a-f]+)$`).FindAllStringSubmatch(out, -1)
	if len(echo) != 2 || echo[0][1] != "entry" || echo[0][2] == "0" || echo[0][3] == "0" || echo[0][2] == echo[0][3] || echo[0][2] != echo[1][2] || echo[0][3] != echo[1][3] {
		t.Errorf("Echo's type words: %q", echo)
	}
	if t.Failed() {
		t.Logf("bpftrace output:\n%s", out)
	}
}

// 2b. A function's entry and exit probes share one semaphore: with only
// the exit probes attached, they fire with the right results, for a tiny
// function (Minus, split: its traced copy runs while either probe is
// attached) and for one whose deferred recover sets them (SplitBill).
func (a *auto) testExitOnly(t *testing.T, bt tracetest.Bpftrace) {
	bt.RequireAttach(t)
	bin := a.bin(t, "inst")
	script := strings.ReplaceAll(`
usdt:BIN:shop:exit__orders__Cents__Minus { printf("P exit Minus r=%ld\n", arg2); }
usdt:BIN:shop:exit__orders__SplitBill { printf("P exit SplitBill share=%ld errnil=%d\n", arg2, *(uint64 *)uptr(arg3) == 0); }
`, "BIN", bin)
	out, err := bt.Output(90*time.Second, "", "-e", script, "-c", bin+" demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"P exit Minus r=-150", "P exit SplitBill share=250 errnil=1", "P exit SplitBill share=-1 errnil=0"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("bpftrace did not print %q:\n%s", w, out)
		}
	}
}

var autoMinusLine = regexp.MustCompile(`(?m)^minus d=(\d+) gid=(\d+) result=(-?\d+)$`)

// 3. arg0 is the goroutine id that stack traces show.
func (a *auto) testGoroutineIDs(t *testing.T, bt tracetest.Bpftrace) {
	out := a.demoTrace(t, bt)
	store := autoStoreLine.FindStringSubmatch(out)
	if store == nil {
		t.Fatalf("auto demo did not print its goroutine id:\n%s", out)
	}
	if !strings.Contains(out, "P entry Place g="+store[2]+" ") {
		t.Errorf("the main goroutine is %s in its stack trace, but Place's arg0 is not:\n%s", store[2], out)
	}
	m := autoMinusLine.FindAllStringSubmatch(out, -1)
	if len(m) != 3 {
		t.Fatalf("auto demo printed %d goroutine lines, want 3:\n%s", len(m), out)
	}
	ids := map[string]bool{store[2]: true}
	for i, line := range m {
		d, gid, result := line[1], line[2], line[3]
		if want := []string{"11", "22", "33"}[i]; d != want {
			t.Errorf("goroutine line %d is for d=%s, want %s", i, d, want)
		}
		if ids[gid] {
			t.Errorf("goroutine id %s printed twice: the calls must run on distinct goroutines", gid)
		}
		ids[gid] = true
		for _, w := range []string{"P entry Minus g=" + gid + " c=5 d=" + d, "P exit Minus g=" + gid + " r=" + result} {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("goroutine %s called Minus(%s), but bpftrace did not print %q", gid, d, w)
			}
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// autoShipScript pairs Store.Ship's entry and exit on the goroutine id,
// counting the pairs whose exit ran on another thread than their entry, and
// counts how many exits tid pairing would have matched with another
// goroutine's entry. Counters are count() aggregations: @n++ is not atomic
// and loses increments when several CPUs fire at once.
const autoShipScript = `
usdt:BIN:shop:entry__orders__Store__Ship {
	@entries = count();
	@start[arg0] = nsecs;
	@entry_tid[arg0] = tid;
	@goid_on[tid] = arg0;
}
usdt:BIN:shop:exit__orders__Store__Ship {
	if (@start[arg0]) {
		@pairs = count();
		if (@entry_tid[arg0] != tid) { @migrated = count(); }
		delete(@start[arg0]);
		delete(@entry_tid[arg0]);
	} else {
		@unmatched = count();
	}
	if (@goid_on[tid] == 0) {
		@tid_unmatched = count();
	} else if (@goid_on[tid] != arg0) {
		@tid_mispaired = count();
	}
}
END { clear(@start); clear(@entry_tid); clear(@goid_on); }
`

// counter returns the count() bpftrace printed for @name; one that never
// counted is not printed, and is 0 unless required.
func counter(t *testing.T, out, name string, required bool) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^@` + name + `: (\d+)$`).FindStringSubmatch(out)
	if m == nil {
		if required {
			t.Fatalf("bpftrace printed no @%s:\n%s", name, out)
		}
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// 4. 50 goroutines that sleep, yield and wait on channels inside Ship:
// pairing on arg0 finds every pair.
func (a *auto) testLatencyPairing(t *testing.T, bt tracetest.Bpftrace) {
	bin := a.bin(t, "inst")
	out := bpftrace(t, bt, strings.ReplaceAll(autoShipScript, "BIN", bin), bin+" ship")
	if !strings.Contains(out, "shipped=50 failed=0\n") {
		t.Errorf("auto ship did not ship 50 orders:\n%s", out)
	}
	entries, pairs, unmatched := counter(t, out, "entries", true), counter(t, out, "pairs", true), counter(t, out, "unmatched", false)
	if entries != 50 || pairs != 50 || unmatched != 0 {
		t.Errorf("keyed on arg0: %d entries, %d pairs, %d unmatched exits; want 50, 50, 0\n%s", entries, pairs, unmatched, out)
	}
	t.Logf("%d of 50 calls returned on another thread than they entered on; keyed on tid, %d exits would pair with another goroutine's entry and %d with none",
		counter(t, out, "migrated", false), counter(t, out, "tid_mispaired", false), counter(t, out, "tid_unmatched", false))
}

// 4b. An exit probe's arg1 is the nanoseconds since the same call's entry,
// with no entry probe attached: for a sleep, for each level of a recursion,
// for a function a panic unwinds through and for one that recovers it.
func (a *auto) testElapsed(t *testing.T, bt tracetest.Bpftrace) {
	bt.RequireAttach(t)
	bin := a.bin(t, "inst")
	t.Run("nap alone", func(t *testing.T) {
		out := bpftrace(t, bt, strings.ReplaceAll(`usdt:BIN:shop:exit__main__nap { printf("L nap %ld\n", arg1); }`, "BIN", bin), bin+" latency")
		m := regexp.MustCompile(`(?m)^L nap (-?\d+)$`).FindAllStringSubmatch(out, -1)
		if len(m) != 1 {
			t.Fatalf("want one nap exit:\n%s", out)
		}
		if ns, _ := strconv.ParseInt(m[0][1], 10, 64); ns < 2e6 || ns > 20e6 {
			t.Errorf("nap slept 2ms, its exit probe says %dns", ns)
		}
	})
	out := bpftrace(t, bt, strings.ReplaceAll(`
usdt:BIN:shop:exit__main__descend { printf("L descend %ld %ld\n", arg2, arg1); }
usdt:BIN:shop:exit__main__panicky { printf("L panicky 0 %ld\n", arg1); }
usdt:BIN:shop:exit__main__rescue { printf("L rescue 0 %ld\n", arg1); }
`, "BIN", bin), bin+" latency")
	ns := map[string]int64{}
	for _, m := range regexp.MustCompile(`(?m)^L (\w+) (\d+) (-?\d+)$`).FindAllStringSubmatch(out, -1) {
		ns[m[1]+m[2]], _ = strconv.ParseInt(m[3], 10, 64)
	}
	if len(ns) != 6 {
		t.Fatalf("want 4 descend exits, one panicky and one rescue:\n%s", out)
	}
	for n := 1; n <= 3; n++ {
		outer, inner := ns[fmt.Sprint("descend", n)], ns[fmt.Sprint("descend", n-1)]
		if inner < 0 || outer-inner < 1e6 || outer > int64(n)*1e6+20e6*tracetest.TimeSlack {
			t.Errorf("descend(%d) took %dns, descend(%d) %dns: want 1ms more, and at most 20ms more than %dms", n, outer, n-1, inner, n)
		}
	}
	if p, r := ns["panicky0"], ns["rescue0"]; p < 2e6 || r-p < 3e6 || r > 25e6*tracetest.TimeSlack {
		t.Errorf("panicky took %dns, rescue %dns: want at least 2ms, and rescue 3ms more", p, r)
	}
	t.Logf("elapsed ns: %v", ns)

	// brittle's rule has unwind: false. Of its two calls, the one that
	// returns fires its exit probe with its result, and the one whose
	// panic unwinds through it fires none; shield, which recovers it, has
	// the deferred exit probe and fires for both.
	t.Run("unwind false", func(t *testing.T) {
		out := bpftrace(t, bt, strings.ReplaceAll(`
usdt:BIN:shop:entry__main__brittle { printf("U entry brittle %ld 1\n", arg1); }
usdt:BIN:shop:exit__main__brittle { printf("U exit brittle %ld %ld\n", arg2, arg1); }
usdt:BIN:shop:exit__main__shield { printf("U exit shield %ld %ld\n", arg2, arg1); }
`, "BIN", bin), bin+" latency")
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^U (.*) (-?\d+)$`).FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
			if ns, _ := strconv.ParseInt(m[2], 10, 64); strings.HasPrefix(m[1], "exit") && (ns <= 0 || ns > 1e9) {
				t.Errorf("%s: elapsed %dns", m[1], ns)
			}
		}
		// Sorted: bpftrace prints each CPU's events in order, not all of them.
		slices.Sort(got)
		want := []string{"entry brittle -1", "entry brittle 4", "exit brittle 8", "exit shield -1", "exit shield 8"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("got events\n%s\nwant\n%s\noutput:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
		}
	})
}

// 5. The script usdt-toolexec bt writes runs without a warning and has a
// histogram per function with an exit probe, labels padded to one length.
func (a *auto) testBtScript(t *testing.T, bt tracetest.Bpftrace) {
	bt.RequireAttach(t)
	bin := a.bin(t, "inst")
	cmd := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "bt", bin)
	script, err := cmd.Output()
	if err != nil {
		t.Fatalf("usdt-toolexec bt: %v", err)
	}
	if bytes.Contains(script, []byte("logf")) {
		t.Errorf("the script uses logf, which has no exit probe:\n%s", script)
	}
	file := filepath.Join(t.TempDir(), "auto.bt")
	if err := os.WriteFile(file, script, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := bt.Output(90*time.Second, "", file, "-c", bin+" all")
	if err != nil {
		t.Fatalf("%v\nscript:\n%s", err, script)
	}
	checkNoWarning(t, out)
	if !strings.Contains(out, "recovered: runtime error: integer divide by zero\n") {
		t.Errorf("auto all did not run to its end:\n%s", out)
	}
	// One histogram per function with an exit probe, labelled as Go names
	// it: all of autoFuncs, which auto all calls.
	labels := map[string]string{} // pkg.Type.Method -> label
	for _, m := range regexp.MustCompile(`(?m)^@us\[(\S+) *\]:\s*\n\[`).FindAllStringSubmatch(out, -1) {
		labels[symbolNoise.ReplaceAllString(m[1], "")] = m[1]
	}
	for _, fn := range autoFuncs {
		if labels[fn] == "" {
			t.Errorf("no histogram for %s", fn)
		}
	}
	for fn, want := range map[string]string{
		"orders.Store.Place": "orders.(*Store).Place",
		"orders.Queue.Push":  "orders.(*Queue[...]).Push",
		"orders.Queue.Len":   "orders.Queue[...].Len",
		"orders.Cents.Minus": "orders.Cents.Minus",
	} {
		if labels[fn] != want {
			t.Errorf("%s's histogram is labelled %q, want %q", fn, labels[fn], want)
		}
	}
	if t.Failed() {
		t.Logf("bpftrace output:\n%s", out)
	}
}

// importPathOf is the -p a function's package is compiled with, as -v
// prints it.
func importPathOf(fn string) string {
	if strings.HasPrefix(fn, "main.") {
		return fn
	}
	return "example.com/auto/" + fn
}

// 6. -v lists the instrumented functions and warns about the rule of
// rules-verbose.yml that selects nothing.
func (a *auto) testVerbose(t *testing.T) {
	bin := a.bin(t, "verbose")
	out := a.buildOutput["verbose"]
	for _, fn := range autoFuncs {
		want := "usdt-toolexec: " + importPathOf(fn) + ": " + autoProbe("entry", fn) + " " + autoProbe("exit", fn) + "\n"
		if !strings.Contains(out, want) {
			t.Errorf("-v does not print %q", want)
		}
	}
	if want := "usdt-toolexec: main.logf: entry__main__logf \n"; !strings.Contains(out, want) {
		t.Errorf("-v does not print %q", want)
	}
	// A tiny function is split; a larger one is not.
	if want := "usdt-toolexec: example.com/auto/orders.Cents.Minus: split: the probes are in minus_usdtTraced, which it calls only while traced\n"; !strings.Contains(out, want) {
		t.Errorf("-v does not print %q", want)
	}
	if bad := "usdt-toolexec: example.com/auto/orders.Store.Place: split"; strings.Contains(out, bad) {
		t.Errorf("-v prints %q: Place is too large to split", bad)
	}
	for fn := range autoNever {
		if strings.Contains(out, "usdt-toolexec: "+importPathOf(fn)+":") {
			t.Errorf("-v lists %s, which must not be instrumented", fn)
		}
	}
	for _, want := range []string{
		"33 functions instrumented in 2 packages\n",
		"usdt-toolexec:   example.com/auto: 16 functions\n",
		"usdt-toolexec:   example.com/auto/orders: 17 functions\n",
		"usdt-toolexec: main.tryReserve: unwind: false, but the exit probe is a deferred call: it defers calls of its own\n",
		`usdt-toolexec: warning: ` + filepath.Join(a.dir, "rules-verbose.yml") + `:21:5: rule 6 selects no function: func "Refund*" matches no function of example.com/auto/orders` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("-v does not print %q", want)
		}
	}
	if n := strings.Count(out, "warning:"); n != 1 {
		t.Errorf("-v prints %d warnings, want 1 (rule 6)", n)
	}
	if t.Failed() {
		t.Logf("go build output:\n%s", out)
	}
	// Without provider: in the rules, probes are go:...
	var got []string
	for _, n := range readelfNotes(t, bin) {
		got = append(got, n.provider+":"+n.name)
	}
	checkProbeSet(t, "readelf -n (rules-verbose.yml)", got, "go", autoWantProbes())
}

// 7. audit has 14 parameters: the goroutine id and the first 11 fill the
// note's 12 arguments, -v says 3 are dropped. spread has 11 results: the
// goroutine id, the elapsed time and the first 10 fill its exit probe's.
func (a *auto) testTooManyArgs(t *testing.T) {
	a.bin(t, "verbose")
	out := a.buildOutput["verbose"]
	for _, want := range []string{
		"usdt-toolexec: main.audit: 3 values not passed: a probe holds 12 (entry: the goroutine id and 11 arguments; exit: the goroutine id, the elapsed time and 10 results)\n",
		"usdt-toolexec: main.spread: 1 values not passed: a probe holds 12 (entry: the goroutine id and 11 arguments; exit: the goroutine id, the elapsed time and 10 results)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("-v does not print %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "values not passed: a probe holds 12"); n != 2 {
		t.Errorf("-v reports dropped arguments %d times, want twice (audit, spread)", n)
	}
	want := map[string][]string{
		"entry__main__audit":  {"-8", "-2", "-2", "-2", "-2", "-2", "-2", "-2", "-2", "-2", "-2", "-2"},
		"exit__main__audit":   {"-8", "-8", "-8"},
		"entry__main__spread": {"-8", "-1"},
		"exit__main__spread":  {"-8", "-8", "-1", "-1", "-1", "-1", "-1", "-1", "-1", "-1", "-1", "-1"},
	}
	for _, n := range readelfNotes(t, a.bin(t, "inst")) {
		w, ok := want[n.name]
		if !ok {
			continue
		}
		delete(want, n.name)
		var sizes []string
		for _, m := range argSpec.FindAllStringSubmatch(n.args, -1) {
			sizes = append(sizes, m[1])
		}
		if !slices.Equal(sizes, w) {
			t.Errorf("%s: argument sizes %v (%q), want %v", n.name, sizes, n.args, w)
		}
	}
	for name := range want {
		t.Errorf("no note for %s", name)
	}
}

// frame is one function of a goroutine's traceback.
type frame struct{ fn, pos string }

var tracebackFrame = regexp.MustCompile(`(?m)^(\S+)\(.*\)\n\t(\S+):(\d+)(?: \+0x[0-9a-f]+)?$`)

// crashFrames runs bin crash and returns the frames of the fixture's files
// in the panicking goroutine's traceback.
func crashFrames(t *testing.T, dir, bin string) []frame {
	t.Helper()
	out, err := exec.Command(bin, "crash").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !bytes.Contains(out, []byte("panic: runtime error: integer divide by zero")) {
		t.Fatalf("%s crash: %v, want a panic:\n%s", bin, err, out)
	}
	// The panicking goroutine's traceback comes first.
	_, first, _ := strings.Cut(string(out), "\n\ngoroutine ")
	first, _, _ = strings.Cut(first, "\n\ngoroutine ")
	var frames []frame
	for _, m := range tracebackFrame.FindAllStringSubmatch(first, -1) {
		if rel, err := filepath.Rel(dir, m[2]); err == nil && !strings.HasPrefix(rel, "..") {
			frames = append(frames, frame{m[1], rel + ":" + m[3]})
		}
	}
	return frames
}

// 8a. A panic in instrumented code prints the lines, and the function
// names, of the plain build. Inlining may differ (an instrumented function
// has a defer and is never inlined): a plain frame inlined into its caller
// is named caller.callee.
func (a *auto) testStackTrace(t *testing.T) {
	plain := crashFrames(t, a.dir, a.bin(t, "plain"))
	inst := crashFrames(t, a.dir, a.bin(t, "inst"))
	want := []string{"main.go:77", "orders/orders.go:214", "main.go:76", "main.go:160", "main.go:222"}
	var lines []string
	for _, f := range plain {
		lines = append(lines, f.pos)
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("the plain build's traceback is at %v, want %v (has the fixture changed?)", lines, want)
	}
	if len(inst) != len(plain) {
		t.Fatalf("instrumented traceback %v, plain %v", inst, plain)
	}
	for i := range plain {
		p, q := plain[i], inst[i]
		if p.pos != q.pos {
			t.Errorf("frame %d: instrumented at %s, plain at %s", i, q.pos, p.pos)
		}
		// main.settle.func1 may be main.runCrash.settle.func1 when
		// settle is inlined into runCrash.
		_, short, _ := strings.Cut(q.fn, ".")
		if p.fn != q.fn && !strings.HasSuffix(p.fn, "."+short) {
			t.Errorf("frame %d: instrumented build names it %s, plain build %s", i, q.fn, p.fn)
		}
	}
	if t.Failed() {
		t.Logf("plain %v\ninstrumented %v", plain, inst)
	}
}

// symbolLines maps every function symbol of the fixture's packages in bin
// to the file:line (relative to dir) of each line-table row in its code,
// and returns the names of the files in the line table.
func symbolLines(t *testing.T, bin, dir string) (map[string][]string, []string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var funcs []elf.Symbol
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && (strings.HasPrefix(s.Name, "main.") || strings.HasPrefix(s.Name, "example.com/auto/")) {
			funcs = append(funcs, s)
		}
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].Value < funcs[j].Value })
	sets := map[string]map[string]bool{}
	for _, s := range funcs {
		sets[s.Name] = map[string]bool{}
	}
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	r := d.Reader()
	for {
		cu, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if cu == nil {
			break
		}
		r.SkipChildren()
		lr, err := d.LineReader(cu)
		if err != nil || lr == nil {
			continue
		}
		for _, fe := range lr.Files() {
			if fe != nil {
				files[fe.Name] = true
			}
		}
		var e dwarf.LineEntry
		for lr.Next(&e) == nil {
			if e.File == nil || e.EndSequence {
				continue
			}
			rel, err := filepath.Rel(dir, e.File.Name)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			i := sort.Search(len(funcs), func(i int) bool { return funcs[i].Value+funcs[i].Size > e.Address })
			if i < len(funcs) && funcs[i].Value <= e.Address {
				sets[funcs[i].Name][fmt.Sprintf("%s:%d", rel, e.Line)] = true
			}
		}
	}
	lines := map[string][]string{}
	for name, set := range sets {
		for l := range set {
			lines[name] = append(lines[name], l)
		}
		sort.Strings(lines[name])
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return lines, names
}

// declSpans returns the first and last line of every function declared
// in the auto command's files, by "pkg.Func" or "pkg.Type.Method".
func declSpans(t *testing.T, dir string) map[string][2]int {
	t.Helper()
	spans := map[string][2]int{}
	for _, file := range []string{"main.go", "orders/orders.go"} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(dir, file), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := f.Name.Name + "." + fd.Name.Name
			if fd.Recv != nil {
				typ := fd.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				name = f.Name.Name + "." + typ.(*ast.Ident).Name + "." + fd.Name.Name
			}
			spans[name] = [2]int{fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line}
		}
	}
	return spans
}

var (
	symbolPkgPath = regexp.MustCompile(`^example\.com/auto/`)
	symbolNoise   = regexp.MustCompile(`\[[^\]]*\]|\(\*|\)`)
)

// declOf finds the declaration a function symbol's code comes from: the
// function itself, or the one its closure (func1, deferwrap1, ...) is in.
func declOf(spans map[string][2]int, symbol string) ([2]int, bool) {
	parts := strings.Split(symbolNoise.ReplaceAllString(symbolPkgPath.ReplaceAllString(symbol, ""), ""), ".")
	for n := min(3, len(parts)); n >= 2; n-- {
		if span, ok := spans[strings.Join(parts[:n], ".")]; ok {
			return span, true
		}
	}
	return [2]int{}, false
}

// 8b. Every function of the fixture keeps the lines it has code on: each
// line with code in the plain build has code in the instrumented build,
// in the same function, and what the instrumented build adds is on lines
// of the same declaration: the probes on the line of the opening brace, and
// statements the compiler now gives code of their own (stores to results,
// which the exit probe reads from memory; other register choices). Both are
// built without inlining in the fixture's packages
// (-gcflags=example.com/auto/...=-l): instrumenting changes what is
// inlined, which would otherwise move lines between functions. The traced
// copy of a small function (Name_usdtTraced, name_usdtTraced for a method)
// has code only on lines of the
// original's declaration, on every line the original has code on in the
// plain build. No rewritten file's name may reach the line table.
func (a *auto) testDWARF(t *testing.T) {
	_, files := symbolLines(t, a.bin(t, "inst"), a.dir)
	for _, f := range files {
		if strings.Contains(f, "usdt_rewritten_") {
			t.Errorf("the line table names the rewritten copy %s", f)
		}
	}
	plain, _ := symbolLines(t, a.bin(t, "plain-noinline"), a.dir)
	inst, _ := symbolLines(t, a.bin(t, "inst-noinline"), a.dir)
	spans := declSpans(t, a.dir)
	for _, fn := range []string{"main.audit", "main.settle.func1", "example.com/auto/orders.(*Store).Place", "example.com/auto/orders.FindBin"} {
		if len(plain[fn]) == 0 {
			t.Errorf("the plain build has no lines for %s", fn)
		}
	}
	var names []string
	for name := range plain {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		got, ok := inst[name]
		if !ok {
			t.Errorf("%s: not in the instrumented build", name)
			continue
		}
		span, ok := declOf(spans, name)
		if !ok {
			t.Errorf("%s: no declaration found in the source", name)
			continue
		}
		var missing, added []string
		for _, l := range plain[name] {
			if !slices.Contains(got, l) {
				missing = append(missing, l)
			}
		}
		for _, l := range got {
			if slices.Contains(plain[name], l) {
				continue
			}
			added = append(added, l)
			_, n, _ := strings.Cut(l, ":")
			if line, _ := strconv.Atoi(n); line < span[0] || line > span[1] {
				t.Errorf("%s: the instrumented build has code on %s, outside its declaration (lines %d-%d)", name, l, span[0], span[1])
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s: lines %v have code in the plain build, not in the instrumented one (which has %v)", name, missing, got)
		}
		if len(added) > 0 {
			t.Logf("%s: the instrumented build also has code on %v", name, added)
		}
	}
	for name, lines := range inst {
		if _, ok := plain[name]; ok || strings.Contains(name, "usdtAuto") {
			continue
		}
		// A small function's traced copy has the original's lines and
		// the probes', all in the original's declaration.
		orig := tracedSuffix.ReplaceAllString(name, "")
		if orig == name {
			t.Errorf("%s (%v) is only in the instrumented build", name, lines)
			continue
		}
		span, ok := declOf(spans, orig)
		if i := strings.LastIndexByte(orig, '.'); !ok && i >= 0 {
			// An exported method's copy starts in lower case.
			orig = orig[:i+1] + strings.ToUpper(orig[i+1:i+2]) + orig[i+2:]
			span, ok = declOf(spans, orig)
		}
		if !ok {
			t.Errorf("%s: no declaration found for %s", name, orig)
			continue
		}
		for _, l := range lines {
			_, n, _ := strings.Cut(l, ":")
			if line, _ := strconv.Atoi(n); line < span[0] || line > span[1] {
				t.Errorf("%s: code on %s, outside the declaration of %s (lines %d-%d)", name, l, orig, span[0], span[1])
			}
		}
		for _, l := range plain[orig] {
			if !slices.Contains(lines, l) {
				t.Errorf("%s: no code on %s, where %s has code in the plain build", name, l, orig)
			}
		}
	}
}

// tracedSuffix ends the name of a small instrumented function's traced
// copy.
var tracedSuffix = regexp.MustCompile(`_usdtTraced\d*`)

// 8c. go test -cover profiles are the same with and without probes.
func (a *auto) testCover(t *testing.T) {
	profile := func(name string, args ...string) []byte {
		t.Helper()
		test := filepath.Join(a.out, name+".test")
		args = append([]string{"test", "-c", "-covermode=count", "-o", test}, append(args, "./orders")...)
		if out, err := goRun(a.dir, []string{"CGO_ENABLED=0"}, args...); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		prof := filepath.Join(a.out, name+".cover")
		cmd := exec.Command(test, "-test.count=1", "-test.coverprofile="+prof)
		cmd.Dir = filepath.Join(a.dir, "orders")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", test, err, out)
		}
		data, err := os.ReadFile(prof)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	plain := profile("cover-plain")
	inst := profile("cover-inst", a.toolexec("-rules", a.rules))
	var names []string
	for _, n := range readelfNotes(t, filepath.Join(a.out, "cover-inst.test")) {
		names = append(names, n.name)
	}
	if !slices.Contains(names, "entry__orders__Store__Place") {
		t.Fatalf("the instrumented test binary has no entry__orders__Store__Place probe: %v", names)
	}
	if !bytes.HasPrefix(plain, []byte("mode: count\n")) || bytes.Count(plain, []byte("\n")) < 20 {
		t.Fatalf("implausible coverage profile:\n%s", plain)
	}
	if !bytes.Equal(plain, inst) {
		t.Errorf("coverage profiles differ\nplain:\n%s\ninstrumented:\n%s", plain, inst)
	}
}

// 9. The same rules give the same binary: twice in one directory, and
// with -trimpath from two directories, the second built from scratch (-a)
// so that the rewrite runs again.
func (a *auto) testReproducible(t *testing.T) {
	cmpFiles := func(x, y string) {
		t.Helper()
		bx, err := os.ReadFile(x)
		if err != nil {
			t.Fatal(err)
		}
		by, err := os.ReadFile(y)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bx, by) {
			out, _ := exec.Command("cmp", x, y).CombinedOutput()
			t.Errorf("%s and %s differ: %s", filepath.Base(x), filepath.Base(y), out)
		}
	}
	inst := a.bin(t, "inst")
	again, _, err := a.goBuild(a.dir, "inst-again", false, a.toolexec("-rules", a.rules), ".")
	if err != nil {
		t.Fatal(err)
	}
	cmpFiles(inst, again)

	dir2 := userModule(t, "auto", "example.com/auto")
	trim1, _, err := a.goBuild(a.dir, "trim1", false, "-trimpath", a.toolexec("-rules", a.rules), ".")
	if err != nil {
		t.Fatal(err)
	}
	trim2, _, err := a.goBuild(dir2, "trim2", false, "-a", "-trimpath", a.toolexec("-rules", filepath.Join(dir2, "rules.yml")), ".")
	if err != nil {
		t.Fatal(err)
	}
	cmpFiles(trim1, trim2)
	data, err := os.ReadFile(trim2)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{a.dir, dir2, "usdt_rewritten_", "/go-build"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the -trimpath binary contains %q", s)
		}
	}
	if len(readelfNotes(t, trim2)) != len(autoWantProbes()) {
		t.Errorf("the -trimpath binary does not have the %d probes", len(autoWantProbes()))
	}
}

const autoCgoScript = `
usdt:BIN:shop:entry__cprice__Scale { printf("P entry Scale g=%ld cents=%ld percent=%ld\n", arg0, arg1, arg2); }
usdt:BIN:shop:exit__cprice__Scale { printf("P exit Scale g=%ld r=%ld\n", arg0, arg2); }
usdt:BIN:shop:entry__cprice__Label { printf("P entry Label g=%ld cents=%ld currency=%s\n", arg0, arg1, str(arg2)); }
usdt:BIN:shop:exit__cprice__Label { printf("P exit Label g=%ld r=%s\n", arg0, str(arg2)); }
`

// 10. A cgo package: its user code (the *.cgo1.go files) is instrumented,
// cgo's own _cgo_* files are not, and the probes fire in a binary built
// with CGO_ENABLED=1.
func (a *auto) testCgo(t *testing.T) {
	tracetest.Require(t, "gcc")
	bin, out, err := a.goBuild(a.dir, "cgoshop", true, a.toolexec("-v", "-rules", a.rules), "./cgoshop")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"usdt-toolexec: example.com/auto/cprice.Scale: entry__cprice__Scale exit__cprice__Scale\n",
		"usdt-toolexec: example.com/auto/cprice.Label: entry__cprice__Label exit__cprice__Label\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("-v does not print %q:\n%s", want, out)
		}
	}
	// Through another -exec wrapper (env), the compile step writes the
	// files it rewrites into the work directory, which -work keeps,
	// instead of passing them through memory. (env leaves the tools'
	// identity as it is: a compiler flag of no other build has cprice
	// compiled again.)
	_, out, err = a.goBuild(a.dir, "cgoshop-disk", true, "-work", "-gcflags=example.com/auto/cprice=-e", a.toolexec("-rules", a.rules, "-exec", "env"), "./cgoshop")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^WORK=(\S+)$`).FindStringSubmatch(out); m != nil {
		t.Cleanup(func() { os.RemoveAll(m[1]) })
		var rewritten []string
		filepath.WalkDir(m[1], func(path string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), "usdt_rewritten_") {
				rewritten = append(rewritten, d.Name())
			}
			return nil
		})
		if !slices.Equal(rewritten, []string{"usdt_rewritten_cprice.cgo1.go"}) {
			t.Errorf("rewritten files %v, want only cprice.cgo1.go", rewritten)
		}
	} else {
		t.Errorf("go build -work printed no WORK=:\n%s", out)
	}
	want := map[string]bool{"entry__cprice__Scale": true, "exit__cprice__Scale": true, "entry__cprice__Label": true, "exit__cprice__Label": true}
	checkProbeSet(t, "bpftrace -l (cgoshop)", bpftraceList(t, tracetest.Host, bin), "shop", want)
	checkSiteNops(t, bin)
	trace := bpftrace(t, tracetest.Host, strings.ReplaceAll(autoCgoScript, "BIN", bin), bin)
	for _, w := range []string{
		"scale=-300",
		"label=EUR 7",
		// -2000 * 15 / 100, computed in C.
		"P entry Scale g=1 cents=-2000 percent=15",
		"P exit Scale g=1 r=-300",
		"P entry Label g=1 cents=7 currency=EUR",
		"P exit Label g=1 r=EUR 7",
	} {
		if !strings.Contains(trace, w+"\n") {
			t.Errorf("cgoshop under bpftrace did not print %q:\n%s", w, trace)
		}
	}
}
