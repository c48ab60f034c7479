package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/tracetest"
)

// libbpfConsumer is testdata/libbpf built with the host's clang against
// the libbpf-dev of bt's system: a loader and the BPF objects for the types
// fixture and for the automatic probes of testdata/auto. The loader links
// the host's libbpf.so.1 and runs with the chroot's just as well; the BPF
// side's usdt.bpf.h must come from the libbpf that fills its maps.
type libbpfConsumer struct{ loader, types, auto string }

func buildLibbpfConsumer(t *testing.T, bt tracetest.Bpftrace, dir string) libbpfConsumer {
	t.Helper()
	tracetest.Require(t, "clang")
	inc := filepath.Join(bt.Root(), "usr", "include")
	if _, err := os.Stat(filepath.Join(inc, "bpf", "usdt.bpf.h")); err != nil {
		t.Skipf("libbpf's usdt.bpf.h is missing (Debian: apt-get install libbpf-dev): %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("testdata", "libbpf")
	c := libbpfConsumer{filepath.Join(dir, "usdtload"), filepath.Join(dir, "types.bpf.o"), filepath.Join(dir, "auto.bpf.o")}
	// No vmlinux.h: the USDT programs need only the UAPI pt_regs.
	bpf := []string{"-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-I", inc, "-I", filepath.Join(inc, "x86_64-linux-gnu"), "-c", filepath.Join(src, "probes.bpf.c")}
	for _, args := range [][]string{
		append(bpf, "-DTYPES", "-o", c.types),
		append(bpf, "-o", c.auto),
		{"-O2", "-Wall", "-Werror", "-o", c.loader, filepath.Join(src, "loader.c"), "-lbpf"},
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
			c = buildLibbpfConsumer(t, bt, filepath.Join(tmp, bt.Name))
			consumers[bt.Name] = c
		}
		return c
	}
	dir := fixture(t, "types")
	for _, r := range []route{routeA, routeB} {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
				c := consumer(t, bt)
				out, err := bt.Exec(90*time.Second, c.loader, c.types, "types", bin, "fire")
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
		a := &auto{dir: copyAutoFixture(t), out: t.TempDir(), memo: map[string]memoized{}, buildOutput: map[string]string{}}
		a.rules = filepath.Join(a.dir, "rules.yml")
		bin := a.bin(t, "inst")
		eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
			c := consumer(t, bt)
			out, err := bt.Exec(90*time.Second, c.loader, "-w", c.auto, "shop", bin, "demo")
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
}
