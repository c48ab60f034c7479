package e2e

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// valuesScript prints every argument bpftrace can read (arg0-arg5 on
// x86_64) of each types.d probe. bpftrace's printf formats %d as a 32-bit
// int, so 64-bit values need %ld and %lu. bpftrace 0.17's str() reads 64
// bytes at most, so the 300-byte string's truncation is checked by reading
// the bytes at offsets 255 and 256 directly too.
//
// bpftrace attaches the probes one by one and they fire meanwhile, so the
// ticks count only once every other probe has fired (with -p under load,
// the last probe can be attached several ticks after the first). Each
// probe prints once: the program fires every probe every millisecond, and
// a line a fire can fill bpftrace's perf buffer until it drops events. A
// run on arm64 under TCG (CI, stop 63) printed thousands of lines but not
// the ints line the tick had seen.

const valuesScript = `
usdt:BIN:types:ints /@ints == 0/ { @ints = 1; printf("ints %ld %ld %ld %ld %ld %ld\n", arg0, arg1, arg2, arg3, arg4, arg5); }
usdt:BIN:types:wide /@wide == 0/ { @wide = 1; printf("wide %ld %lu %lx %ld %ld %lx\n", arg0, arg1, arg2, arg3, arg4, arg5); }
usdt:BIN:types:strs /@strs == 0/ { @strs = 1; printf("strs [%s][%s][%s][%s] %d %d\n", str(arg0), str(arg1), str(arg2), str(arg3), *(uint8*)(arg2+255), *(uint8*)(arg2+256)); }
usdt:BIN:types:chars /@chars == 0/ { @chars = 1; printf("chars %ld %ld %ld %ld %ld %lu\n", arg0, arg1, arg2, arg3, arg4, arg5); }
usdt:BIN:types:twelve /@twelve == 0/ { @twelve = 1; printf("twelve %ld %ld %ld %ld %ld %ld\n", arg0, arg1, arg2, arg3, arg4, arg5); }
usdt:BIN:types:tick { if (@ints + @wide + @strs + @chars + @twelve == 5) { @ticks++; if (@ticks > 3) { exit(); } } }
`

// wantValues are the values main.go passes, as bpftrace must print them.
var wantValues = []string{
	"ints -128 255 -32768 65535 -2147483648 4294967295",
	"wide -9223372036854775808 18446744073709551615 deadbeef 1 0 PTR",
	"strs [][héllo, 世界][LONG][plain] 53 0",
	"chars -5 -6 250 -7 1099511627776 9223372036854775808",
	"twelve 0 -1 2 -3 4 -5",
}

var ptrLine = regexp.MustCompile(`(?m)^ptr=0x([0-9a-f]+)$`)

func TestArguments(t *testing.T) {
	requireAMD64(t)
	dir := fixture(t, "types")
	for _, r := range guestRoutes(routeA, routeB, routeC, route{name: "a-pie", toolexec: true, flags: []string{"-buildmode=pie"}}) {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
				out := bpftrace(t, bt, strings.ReplaceAll(valuesScript, "BIN", bin), bin+" fire")
				m := ptrLine.FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("the program did not print its pointer:\n%s", out)
				}
				checkValues(t, bt.StrLen, out, m[1])
				if !kernelOnly() { // how many bpftrace reads is bpftrace's
					checkArgsPastSix(t, bt, bin)
				}
			})
		})
	}
}

// checkArgsPastSix reads the twelve probe's arguments from 6 on, as many
// as bt reads, and checks that it refuses the next one plainly: bpftrace
// 0.17 (bcc's argument reader) stops at arg5 on x86_64 and at arg7 on
// aarch64, 0.27 (libbpf's) reads all twelve.
func checkArgsPastSix(t *testing.T, bt tracetest.Bpftrace, bin string) {
	t.Helper()
	run := func(args []string) (string, error) {
		script := fmt.Sprintf(`usdt:%s:types:twelve { printf("twelve%s\n", %s); exit(); }`, bin, strings.Repeat(" %ld", len(args)), strings.Join(args, ", "))
		return bt.Output(90*time.Second, "", "-e", script, "-c", bin+" fire")
	}
	if bt.Args < 12 {
		next := fmt.Sprintf("arg%d", bt.Args)
		out, err := run([]string{next})
		if err == nil || !strings.Contains(out, "doesn't support "+next) {
			t.Errorf("bpftrace %s is known to read %d arguments, but %s gave (err %v):\n%s", bt.Name, bt.Args, next, err, out)
		}
	}
	var args, want []string
	for i := 6; i < bt.Args; i++ {
		args = append(args, fmt.Sprintf("arg%d", i))
		want = append(want, strconv.Itoa(i*[]int{1, -1}[i%2]))
	}
	if len(args) == 0 {
		return
	}
	out, err := run(args)
	if err != nil {
		t.Fatal(err)
	}
	if w := "twelve " + strings.Join(want, " ") + "\n"; !strings.Contains(out, w) {
		t.Errorf("bpftrace %s did not print %q:\n%s", bt.Name, w, out)
	}
}

// checkValues checks the lines a consumer printed for valuesScript; its
// strings hold strLen bytes at most, NUL included.
func checkValues(t *testing.T, strLen int, out, ptr string) {
	t.Helper()
	// The program passes 300 bytes; the probe gets the first 256 and a NUL.
	long := strings.Repeat("0123456789", 30)[:min(256, strLen-1)]
	for _, want := range wantValues {
		want = strings.NewReplacer("PTR", ptr, "LONG", long).Replace(want)
		if !strings.Contains(out, want+"\n") {
			t.Errorf("bpftrace did not print %q:\n%s", want, out)
		}
	}
}

// TestArgumentsAttachPID reads the same values from a process that was
// already running when bpftrace attached.
func TestArgumentsAttachPID(t *testing.T) {
	requireAMD64(t)
	dir := fixture(t, "types")
	for _, r := range guestRoutes(routeA, routeB) {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
				bt.RequireAttach(t)
				p := start(t, bin, "fire")
				var ptr string
				select {
				case line := <-p.lines:
					m := ptrLine.FindStringSubmatch(line)
					if m == nil {
						t.Fatalf("first line %q, want ptr=...", line)
					}
					ptr = m[1]
				case <-time.After(10 * time.Second):
					t.Fatal("the program printed nothing")
				}
				out, err := bt.Output(90*time.Second, "", "-p", fmt.Sprint(p.cmd.Process.Pid), "-e", strings.ReplaceAll(valuesScript, "BIN", bin))
				if err != nil {
					t.Fatal(err)
				}
				checkValues(t, bt.StrLen, out, ptr)
			})
		})
	}
}

// TestSemaphoreGating attaches to a running process: the program's own
// Enabled check must turn true while bpftrace is attached and false after.
func TestSemaphoreGating(t *testing.T) {
	dir := fixture(t, "types")
	for _, r := range guestRoutes(routeA, routeB) {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
				bt.RequireAttach(t)
				p := start(t, bin, "gate")
				p.expect(t, "enabled=false", 10*time.Second)
				script := fmt.Sprintf(`usdt:%s:types:ints { @n++; if (@n > 50) { printf("arg0=%%ld\n", arg0); exit(); } }`, bin)
				out, err := bt.Output(90*time.Second, "", "-p", fmt.Sprint(p.cmd.Process.Pid), "-e", script)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(out, "arg0=1\n") {
					t.Errorf("bpftrace -p did not read the argument:\n%s", out)
				}
				p.expect(t, "enabled=true", 10*time.Second)
				p.expect(t, "enabled=false", 10*time.Second)
			})
		})
	}
}

// TestGDB reads what bpftrace cannot: arguments 6 to 11 and the whole
// truncated string.
func TestGDB(t *testing.T) {
	tracetest.Require(t, "gdb")
	requireAMD64(t)
	dir := fixture(t, "types")
	for _, r := range guestRoutes(routeA, routeB) {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			out, err := tracetest.Output(120*time.Second, nil, "gdb", "-batch", "-nx",
				"-ex", "set language c",
				"-ex", "info probes",
				"-ex", "break -probe-stap types:twelve",
				"-ex", "break -probe-stap types:strs",
				"-ex", "run",
				"-ex", "printf \"strs len=%d\\n\", $_strlen((char *)$_probe_arg2)",
				"-ex", "printf \"strs utf8=%s\\n\", (char *)$_probe_arg1",
				"-ex", "continue",
				"-ex", "printf \"twelve %d %d %d %d %d %d %d %d %d %d %d %d\\n\", $_probe_arg0, $_probe_arg1, $_probe_arg2, $_probe_arg3, $_probe_arg4, $_probe_arg5, $_probe_arg6, $_probe_arg7, $_probe_arg8, $_probe_arg9, $_probe_arg10, $_probe_arg11",
				"-ex", "kill",
				"--args", bin, "fire")
			if err != nil {
				t.Fatal(err)
			}
			for name := range wantProbes {
				if !regexp.MustCompile(`(?m)^stap\s+types\s+` + name + `\s`).MatchString(out) {
					t.Errorf("gdb info probes does not list types:%s", name)
				}
			}
			for _, want := range []string{
				"strs len=256\n",
				"strs utf8=héllo, 世界\n",
				"twelve 0 -1 2 -3 4 -5 6 -7 8 -9 10 -11\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("gdb did not print %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestBCCAndPerf lists the probes with bcc's tplist and perf's SDT support.
func TestBCCAndPerf(t *testing.T) {
	dir := fixture(t, "types")
	for _, r := range guestRoutes(routeA, routeB) {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			t.Run("tplist", func(t *testing.T) { checkTplist(t, bin, "types", slices.Collect(maps.Keys(wantProbes))) })
			t.Run("perf", func(t *testing.T) { checkPerfList(t, bin, "types", slices.Collect(maps.Keys(wantProbes))) })
		})
	}
}

// checkTplist checks that bcc's tplist lists every probe of names of
// provider in bin.
func checkTplist(t *testing.T, bin, provider string, names []string) {
	tool := "tplist-bpfcc"
	if _, err := exec.LookPath(tool); err != nil {
		tool = "tplist"
	}
	tracetest.Require(t, tool)
	out, err := tracetest.Output(60*time.Second, nil, tool, "-l", bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.Contains(out, bin+" "+provider+":"+name+"\n") {
			t.Errorf("tplist does not list %s:%s:\n%s", provider, name, out)
		}
	}
}

// checkPerfList checks that perf, once it has bin in its build-id cache,
// lists every probe of names of provider as an SDT event.
func checkPerfList(t *testing.T, bin, provider string, names []string) {
	tracetest.Require(t, "perf")
	penv := tracetest.PerfEnv(t.TempDir())
	if out, err := tracetest.Output(60*time.Second, penv, "perf", "buildid-cache", "--add", bin); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := tracetest.Output(60*time.Second, penv, "perf", "list", "sdt")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.Contains(out, "sdt_"+provider+":"+name) {
			t.Errorf("perf list sdt does not list sdt_%s:%s:\n%s", provider, name, out)
		}
	}
}

// TestExampleScripts runs the example's bpftrace scripts against it. They
// must run without a warning too: users copy them.
func TestExampleScripts(t *testing.T) {
	bin := buildJobs(routeA)(t)
	for _, script := range []string{"latency.bt", "queue.bt"} {
		copyFile(t, filepath.Join(repoRoot, "examples", "provider", script), filepath.Join(filepath.Dir(bin), script))
	}
	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		bt.RequireAttach(t)
		for _, script := range []string{"latency.bt", "queue.bt"} {
			t.Run(script, func(t *testing.T) {
				out, err := bt.Output(90*time.Second, filepath.Dir(bin), script, "-c", "./jobs -jobs 100 -every 1ms")
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"latency.bt": "@run_us[", "queue.bt": "@depth:"}[script]
				if !strings.Contains(out, want) {
					t.Errorf("%s printed no %s histogram:\n%s", script, want, out)
				}
				checkNoWarning(t, out)
			})
		}
	})
}

// checkNoWarning fails the test if bpftrace warned about the script, other
// than with one of the known warnings.
func checkNoWarning(t *testing.T, out string, known ...string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "WARNING") && !slices.ContainsFunc(known, func(k string) bool { return strings.Contains(line, k) }) {
			t.Errorf("bpftrace warned:\n%s", out)
			return
		}
	}
}
