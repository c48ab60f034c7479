package trace

import (
	"bytes"
	"debug/elf"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/testing/elftest"
	"github.com/go-usdt/usdt/internal/testing/wrapperid"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
)

// crossBuild is one way the examples are built for TestSitesCrossBuilt.
type crossBuild struct {
	example string // the directory under examples/
	cgo     bool   // route (b); else route (a), through usdt-toolexec
	rules   string // usdt-toolexec's rules file, for automatic probes
}

// TestSitesCrossBuilt builds the examples for amd64 and for arm64 and reads
// their sites as trace does: each probe must have the same argument names
// and types on both, and the arm64 specs must read the stack (route (a))
// or the argument registers (route (b)).
func TestSitesCrossBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the examples four times")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The wrapper's identity, in every cache key of the builds it wraps,
	// is that of its instrumenting code: a change to the tracer alone
	// leaves the examples' builds for both architectures, the standard
	// library's included, cached.
	id, err := wrapperid.LDFlag(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	toolexec := filepath.Join(t.TempDir(), "usdt-toolexec")
	goBuild(t, root, nil, id, "-o", toolexec, "./cmd/usdt-toolexec")
	// provider.d's parameters, with the Go types of usdtgen's functions.
	jobs := map[string][]string{
		"jobs:job__enqueued": {"id int64", "kind string", "depth int32"},
		"jobs:job__started":  {"id int64", "kind string", "worker uint16", "wait_ns int64"},
		"jobs:job__done":     {"id int64", "kind string", "run_ns int64", "ok bool"},
	}
	// Where job__enqueued's arguments are on arm64: ABI0 passes them on
	// the stack above the saved link register, AAPCS64 in x0, x1 and x2.
	enqueued := map[bool][]bpfprog.Arg{
		false: {{Deref: true, RegOff: 248, Disp: 8, Size: 8, Signed: true}, {Deref: true, RegOff: 248, Disp: 16, Size: 8}, {Deref: true, RegOff: 248, Disp: 24, Size: 4, Signed: true}},
		true:  {{RegOff: 0, Size: 8, Signed: true}, {RegOff: 8, Size: 8}, {RegOff: 16, Size: 4, Signed: true}},
	}
	for _, b := range []crossBuild{{"provider", false, ""}, {"provider", true, ""}, {"toolexec", false, "rules.yml"}} {
		name := b.example + map[bool]string{false: "/toolexec", true: "/cgo"}[b.cgo]
		t.Run(name, func(t *testing.T) {
			params := map[string]map[string][]string{}
			for _, arch := range []string{"amd64", "arm64"} {
				env := []string{"GOARCH=" + arch, "CGO_ENABLED=0"}
				args := []string{"-o", filepath.Join(t.TempDir(), b.example)}
				if b.cgo {
					cc := map[string]string{"amd64": "x86_64-linux-gnu-gcc", "arm64": "aarch64-linux-gnu-gcc"}[arch]
					if _, err := exec.LookPath(cc); err != nil {
						t.Skipf("no %s C compiler (%v; Debian package gcc-%s)", arch, err, strings.TrimSuffix(cc, "-gcc"))
					}
					env = append(env, "CGO_ENABLED=1", "CC="+cc)
				} else {
					flag := "-toolexec=" + toolexec
					if b.rules != "" {
						flag += " -rules " + b.rules
					}
					args = append(args, flag)
				}
				goBuild(t, filepath.Join(root, "examples", b.example), env, append(args, ".")...)
				sites, err := readSites(args[1])
				if err != nil {
					t.Fatalf("%s: %v", arch, err)
				}
				// The tracer may attach at the 5-byte NOP of an amd64 site
				// only: arm64 has a single NOP.
				for _, s := range sites {
					if s.nopPair != (arch == "amd64") {
						t.Errorf("%s %s: nopPair is %v", arch, s.label(), s.nopPair)
					}
				}
				describe(sites)
				params[arch] = shownParams(sites)
				if arch == "arm64" && b.example == "provider" {
					for _, s := range sites {
						if s.Name == "job__enqueued" && !reflect.DeepEqual(s.args, enqueued[b.cgo]) {
							t.Errorf("arm64 job__enqueued reads %+v, want %+v", s.args, enqueued[b.cgo])
						}
					}
				}
			}
			if b.example == "provider" && !reflect.DeepEqual(params["amd64"], jobs) {
				t.Errorf("amd64 probes show %q, want %q", params["amd64"], jobs)
			}
			if len(params["amd64"]) == 0 {
				t.Fatal("no probes")
			}
			for _, label := range slices.Sorted(maps.Keys(params["amd64"])) {
				if a, b := params["amd64"][label], params["arm64"][label]; !slices.Equal(a, b) {
					t.Errorf("%s shows %q on amd64, %q on arm64", label, a, b)
				}
				for _, p := range params["amd64"][label] {
					if strings.HasPrefix(p, "arg") || strings.HasSuffix(p, " ") {
						t.Errorf("%s: argument %q has no name or no type", label, p)
					}
				}
			}
			if len(params["arm64"]) != len(params["amd64"]) {
				t.Errorf("%d probes on arm64, %d on amd64", len(params["arm64"]), len(params["amd64"]))
			}
		})
	}
}

// shownParams maps each site's label to "name type" for every value an
// event of it shows.
func shownParams(sites []site) map[string][]string {
	m := map[string][]string{}
	for _, s := range sites {
		label := s.label()
		if s.exit {
			label += " exit"
		}
		var shown []string
		for i, name := range s.names {
			shown = append(shown, name+" "+s.table.Args[s.firstShown()+i].Type)
		}
		m[label] = shown
	}
	return m
}

func goBuild(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestNopPairsDamaged reads the sites of an executable whose code
// segment's header claims far more bytes than its file holds, as a
// damaged or hostile binary's may: the sites in what the file holds are
// read, the others are not nopPairs, and nothing makes room for what the
// header claims.
func TestNopPairsDamaged(t *testing.T) {
	const at = 0x401000
	code := append(append([]byte{0xc3}, nopPair...), 0xc3, 0x90)
	for _, filesz := range []uint64{uint64(len(code)), 1 << 40, 1<<63 - 1} {
		f, err := elf.NewFile(bytes.NewReader(elftest.Load(code, at, filesz, elf.PF_R|elf.PF_X)))
		if err != nil {
			t.Fatal(err)
		}
		got := nopPairs(f, []uint64{at + 1, at, at + 7, at + 8, at + 4096, at - 1})
		if want := []bool{true, false, false, false, false, false}; !slices.Equal(got, want) {
			t.Errorf("segment of %d bytes claiming %d: nopPairs = %v, want %v", len(code), filesz, got, want)
		}
	}
}

// TestDropConstants: the values a note on a function's own code passes
// as the constant 0 become dropped ones, past the goroutine id and the
// elapsed time (which a note passes as 0 too); a copy's site keeps
// every argument.
func TestDropConstants(t *testing.T) {
	args := func(specs ...bool) []bpfprog.Arg {
		var as []bpfprog.Arg
		for _, c := range specs {
			as = append(as, bpfprog.Arg{Const: c, Size: 8})
		}
		return as
	}
	decl := func(names ...string) []probe.Arg {
		var as []probe.Arg
		for _, n := range names {
			as = append(as, probe.Arg{Name: n})
		}
		return as
	}
	for _, tc := range []struct {
		name          string
		s             site
		args, dropped []string
	}{
		{"entry on the code", site{fn: "main.f", args: args(false, false, true, false), table: probe.Probe{Func: "main.f", Args: decl("goid", "s", "k", "v")}},
			[]string{"goid", "s", "v"}, []string{"k"}},
		{"exit on the code", site{fn: "main.f", exit: true, args: args(false, true, true), table: probe.Probe{Func: "main.f", Args: decl("goid", "elapsed", "xs"), Dropped: decl("more")}},
			[]string{"goid", "elapsed"}, []string{"xs", "more"}},
		{"the copy's", site{fn: "main.f", args: args(false, true), table: probe.Probe{Args: decl("goid", "k")}},
			[]string{"goid", "k"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.strs = make([]bool, len(s.args))
			s.dropConstants()
			names := func(as []probe.Arg) (ns []string) {
				for _, a := range as {
					ns = append(ns, a.Name)
				}
				return ns
			}
			if got := names(s.table.Args); !slices.Equal(got, tc.args) || len(s.args) != len(tc.args) || len(s.strs) != len(tc.args) {
				t.Errorf("args %v (%d specs, %d strs), want %v", got, len(s.args), len(s.strs), tc.args)
			}
			if got := names(s.table.Dropped); !slices.Equal(got, tc.dropped) {
				t.Errorf("dropped %v, want %v", got, tc.dropped)
			}
		})
	}
}
