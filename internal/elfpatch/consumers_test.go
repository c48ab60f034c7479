package elfpatch

import (
	"debug/elf"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// These tests run the real consumers on patched executables: a layout that
// debug/elf accepts but bcc, perf or gdb misread is exactly the failure this
// package exists to prevent. Each consumer skips, saying why, when missing.

// listVariants are read by every consumer: reading notes does not need the
// binary's architecture. attachVariants are also run, so they are native.
var (
	listVariants   = []variant{exeVariant, pieVariant, strippedVariant, cgoVariant, cgoPIEVariant, arm64Variant}
	attachVariants = []variant{exeVariant, pieVariant, strippedVariant, cgoVariant, cgoPIEVariant}
)

// probeWant is one probe a consumer must list.
type probeWant struct {
	provider, name string
	pc, sema       uint64 // 0 when not known in advance (the C probe)
}

func patchedBinary(t *testing.T, v variant) (string, *built, []probeWant) {
	t.Helper()
	path, b := fresh(t, v)
	sites := b.sites(v)
	if err := addSites(path, sites); err != nil {
		t.Fatal(err)
	}
	var want []probeWant
	if b.hasCProbe {
		want = append(want, probeWant{provider: "cprov", name: "cfire"})
	}
	for _, s := range sites {
		want = append(want, probeWant{s.Provider, s.Name, s.PC, s.Semaphore})
	}
	return path, b, want
}

func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	out, err := tracetest.Output(timeout, env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readelfNote is one note as `readelf -n` prints it.
type readelfNote struct {
	provider, name string
	pc, base, sema uint64
	args           string
}

var readelfLoc = regexp.MustCompile(`Location: (0x[0-9a-f]+), Base: (0x[0-9a-f]+), Semaphore: (0x[0-9a-f]+)`)

func parseReadelfNotes(t *testing.T, out string) []readelfNote {
	t.Helper()
	var notes []readelfNote
	var cur *readelfNote
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Provider: "):
			notes = append(notes, readelfNote{provider: strings.TrimPrefix(l, "Provider: ")})
			cur = &notes[len(notes)-1]
		case cur == nil:
		case strings.HasPrefix(l, "Name: "):
			cur.name = strings.TrimPrefix(l, "Name: ")
		case strings.HasPrefix(l, "Arguments: "):
			cur.args = strings.TrimPrefix(l, "Arguments: ")
		case readelfLoc.MatchString(l):
			m := readelfLoc.FindStringSubmatch(l)
			cur.pc, _ = strconv.ParseUint(m[1], 0, 64)
			cur.base, _ = strconv.ParseUint(m[2], 0, 64)
			cur.sema, _ = strconv.ParseUint(m[3], 0, 64)
		}
	}
	return notes
}

var readelfSection = regexp.MustCompile(`^\s*\[\s*(\d+)\]\s+(\S*)\s+([A-Z_0-9]+)`)

func TestConsumersList(t *testing.T) {
	for _, v := range listVariants {
		t.Run(v.name, func(t *testing.T) {
			path, _, want := patchedBinary(t, v)

			t.Run("readelf", func(t *testing.T) {
				tracetest.Require(t, "readelf")
				out := run(t, time.Minute, nil, "readelf", "-n", path)
				t.Log(out)
				notes := parseReadelfNotes(t, out)
				for _, w := range want {
					var found []readelfNote
					for _, n := range notes {
						if n.provider == w.provider && n.name == w.name {
							found = append(found, n)
						}
					}
					if len(found) != 1 {
						t.Errorf("readelf -n shows %s:%s %d times, want once", w.provider, w.name, len(found))
						continue
					}
					n := found[0]
					if n.base == 0 {
						t.Errorf("%s:%s: base is zero", w.provider, w.name)
					}
					if w.pc != 0 && (n.pc != w.pc || n.sema != w.sema || n.args != v.args) {
						t.Errorf("%s:%s: readelf shows pc %#x sema %#x args %q, want %#x %#x %q",
							w.provider, w.name, n.pc, n.sema, n.args, w.pc, w.sema, v.args)
					}
				}
				if len(notes) != len(want) {
					t.Errorf("readelf -n shows %d stapsdt notes, want %d", len(notes), len(want))
				}

				// Section order: every .probes before the one .note.stapsdt.
				probes, note, notes2 := -1, -1, 0
				for _, l := range strings.Split(run(t, time.Minute, nil, "readelf", "-SW", path), "\n") {
					m := readelfSection.FindStringSubmatch(l)
					if m == nil {
						continue
					}
					i, _ := strconv.Atoi(m[1])
					switch {
					case m[2] == probesName:
						probes = i
					case m[2] == noteName:
						note, notes2 = i, notes2+1
						if m[3] != "NOTE" {
							t.Errorf("%s has type %s, want NOTE", noteName, m[3])
						}
					}
				}
				if probes < 0 || note < 0 || probes > note || notes2 != 1 {
					t.Errorf("readelf -S: last .probes at %d, %d .note.stapsdt (last at %d): want .probes before a single note", probes, notes2, note)
				}
			})

			t.Run("bpftrace -l", func(t *testing.T) {
				tracetest.Require(t, "bpftrace")
				out := run(t, time.Minute, nil, "bpftrace", "-l", "usdt:"+path+":*")
				t.Log(out)
				for _, w := range want {
					if line := fmt.Sprintf("usdt:%s:%s:%s", path, w.provider, w.name); !hasLine(out, line) {
						t.Errorf("bpftrace -l lacks %s:\n%s", line, out)
					}
				}
			})

			t.Run("tplist", func(t *testing.T) {
				tracetest.Require(t, "tplist-bpfcc")
				out := run(t, time.Minute, nil, "tplist-bpfcc", "-l", path)
				t.Log(out)
				for _, w := range want {
					if line := fmt.Sprintf("%s %s:%s", path, w.provider, w.name); !hasLine(out, line) {
						t.Errorf("tplist lacks %q:\n%s", line, out)
					}
				}
			})

			t.Run("gdb", func(t *testing.T) {
				tracetest.Require(t, "gdb")
				out := run(t, time.Minute, nil, "gdb", "-nx", "-batch", "-ex", "info probes", path)
				t.Log(out)
				for _, w := range want {
					re := regexp.MustCompile(`(?m)^stap\s+` + w.provider + `\s+` + w.name + `\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)?`)
					m := re.FindStringSubmatch(out)
					if m == nil {
						t.Errorf("gdb info probes lacks %s:%s:\n%s", w.provider, w.name, out)
						continue
					}
					if pc, _ := strconv.ParseUint(m[1], 0, 64); w.pc != 0 && pc != w.pc {
						t.Errorf("gdb puts %s:%s at %#x, want %#x", w.provider, w.name, pc, w.pc)
					}
				}
			})

			t.Run("perf", func(t *testing.T) {
				tracetest.Require(t, "perf")
				env := tracetest.PerfEnv(t.TempDir())
				run(t, time.Minute, env, "perf", "buildid-cache", "--add", path)
				out := run(t, time.Minute, env, "perf", "list", "sdt")
				t.Log(out)
				for _, w := range want {
					if ev := "sdt_" + w.provider + ":" + w.name; !strings.Contains(out, ev+" ") {
						t.Errorf("perf list sdt lacks %s:\n%s", ev, out)
					}
				}
			})
		})
	}
}

func hasLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// TestConsumersAttach fires the probes under real tracers: the kernel must
// raise the semaphore (the program prints "enabled") and the tracer must
// read the argument the Go code passed.
func TestConsumersAttach(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the attach variants are amd64 programs; this host is %s", runtime.GOARCH)
	}
	for _, v := range attachVariants {
		t.Run(v.name, func(t *testing.T) {
			path, b, _ := patchedBinary(t, v)

			t.Run("untraced", func(t *testing.T) {
				out := run(t, time.Minute, append(os.Environ(), "PROBED_RUN=300ms"), path)
				if strings.Contains(out, "enabled") || !strings.Contains(out, "timeout") {
					t.Errorf("untraced program saw its semaphore set:\n%s", out)
				}
			})

			t.Run("bpftrace", func(t *testing.T) {
				tracetest.RequireAttach(t)
				script := fmt.Sprintf(`usdt:%s:elfpatchtest:fire { printf("arg0=%%d\n", arg0); exit(); }`, path)
				out := run(t, 2*time.Minute, nil, "bpftrace", "-e", script, "-c", path)
				t.Log(out)
				if !strings.Contains(out, "enabled") || !strings.Contains(out, "arg0=42") {
					t.Errorf("bpftrace: want the program enabled and arg0=42:\n%s", out)
				}
				if !b.hasCProbe {
					return
				}
				// The C probe, gated on its own semaphore, still works.
				script = fmt.Sprintf(`usdt:%s:cprov:cfire { printf("c=%%d\n", arg0); exit(); }`, path)
				out = run(t, 2*time.Minute, nil, "bpftrace", "-e", script, "-c", path)
				if !strings.Contains(out, "c=7") {
					t.Errorf("bpftrace on the C probe: want c=7:\n%s", out)
				}
			})

			t.Run("gdb", func(t *testing.T) {
				tracetest.Require(t, "gdb")
				out := run(t, 2*time.Minute, nil, "gdb", "-nx", "-batch",
					"-ex", "break -probe-stap elfpatchtest:fire", "-ex", "run",
					"-ex", "print $_probe_arg0", "-ex", "kill", path)
				if !strings.Contains(out, "enabled") || !strings.Contains(out, "$1 = 42") {
					t.Errorf("gdb: want the program enabled and $_probe_arg0 = 42:\n%s", out)
				}
			})

			t.Run("perf", func(t *testing.T) {
				tracetest.Require(t, "perf")
				tracetest.RequireAttach(t) // also mounts tracefs
				env := tracetest.PerfEnv(t.TempDir())
				run(t, time.Minute, env, "perf", "buildid-cache", "--add", path)
				// -f: another test run beside this one (make test runs
				// the release's tests beside make unit's) may have the
				// event defined; perf names this one's fire_1, ...
				added := run(t, time.Minute, env, "perf", "probe", "-f", "--add", "sdt_elfpatchtest:fire")
				ev := regexp.MustCompile(`sdt_elfpatchtest:fire(_\d+)?\b`).FindString(added)
				if ev == "" {
					t.Fatalf("perf probe named no event:\n%s", added)
				}
				t.Cleanup(func() { tracetest.Output(time.Minute, env, "perf", "probe", "-d", ev) })

				// perf turns pc and semaphore into file offsets through
				// .stapsdt.base and .probes: check the uprobe it defined.
				f := openELF(t, path)
				events, err := os.ReadFile(tracetest.TracefsDir + "/uprobe_events")
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf("%s:0x%016x(0x%x)", path, fileOffset(t, f, b.pc), fileOffset(t, f, b.table+8))
				if !strings.Contains(string(events), want) {
					t.Errorf("uprobe_events lacks %s:\n%s", want, events)
				}
				out := run(t, 2*time.Minute, env, "perf", "stat", "-x,", "-e", ev, "--", path)
				m := regexp.MustCompile(`(?m)^(\d+),[^,]*,` + ev).FindStringSubmatch(out)
				if !strings.Contains(out, "enabled") || m == nil || m[1] == "0" {
					t.Errorf("perf stat: want the program enabled and a non-zero count:\n%s", out)
				}
			})
		})
	}
}

// fileOffset is where the byte at addr is in the file, by program headers
// as the kernel maps it.
func fileOffset(t *testing.T, f *elf.File, addr uint64) uint64 {
	t.Helper()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off
		}
	}
	t.Fatalf("%#x is not in a loaded segment", addr)
	return 0
}
