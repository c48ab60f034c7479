package rewrite_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/toolexec"
	"github.com/go-usdt/usdt/rewrite"
	"github.com/go-usdt/usdt/rules"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGolden instruments testdata/split/input.go with its rules.yml for
// each architecture and compares the rewritten file, the generated Go
// file and the assembly with the golden files, then compiles them with
// the toolchain's compile and asm. The goldens hold the probe table in a
// form no Go release changes (see table_test.go). testdata/switch does
// the same with sites: switch, whose functions the rewritten file holds
// as they are, their traced copies at its end.
func TestGolden(t *testing.T) {
	for _, name := range []string{"split", "switch"} {
		t.Run(name, func(t *testing.T) { testGolden(t, name) })
	}
}

func testGolden(t *testing.T, name string) {
	dir, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	r, err := rules.Load(filepath.Join(dir, "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			out := t.TempDir()
			res, err := rewrite.Package(rewrite.Config{
				ImportPath: "example.com/shop",
				Files:      []string{filepath.Join(dir, "input.go")},
				GOARCH:     arch,
				Rules:      r,
				GoidOffset: 152,
				OutDir:     out,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res == nil || len(res.Files) < 2 {
				t.Fatalf("Package returned %+v, want a rewritten file and generated ones", res)
			}
			tabs := readTables(t, res.Asm)
			tab := tabs[0]
			got := map[string][]byte{"usdt_auto_probes_" + arch + ".s": releaseFree(t, res.Asm, tabs)}
			for _, f := range res.Files {
				// The line directives name the input by its absolute
				// path and the generated file by the output's.
				b := bytes.ReplaceAll(res.Sources[f], []byte(dir), []byte("$DIR"))
				got[filepath.Base(f)] = tab.releaseFreeDecl(t, bytes.ReplaceAll(b, []byte(out), []byte("$OUT")))
			}
			for name, b := range got {
				if arch != "amd64" && strings.HasSuffix(name, ".go") {
					continue // the Go files are the same for every GOARCH
				}
				golden := filepath.Join(dir, "golden", name+".golden")
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, b, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -update)", err)
				}
				if !bytes.Equal(b, want) {
					t.Errorf("%s differs from %s (run go test -update to rewrite it):\n%s", name, golden, b)
				}
			}
			compile(t, arch, out, res)
		})
	}
}

// compile builds the package with usdt-toolexec's own compile step, for
// arch, into an archive.
func compile(t *testing.T, arch, out string, res *rewrite.Result) {
	t.Helper()
	toolDir, err := exec.Command("go", "env", "GOTOOLDIR").Output()
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	t.Setenv("GOARCH", arch)
	t.Setenv("GOOS", "linux")
	var log bytes.Buffer
	step := toolexec.Step{
		Runner:  toolexec.Runner{Stdout: &log, Stderr: &log},
		Compile: filepath.Join(strings.TrimSpace(string(toolDir)), "compile"),
		Args:    []string{"-p", "example.com/shop", "-pack", "-o", filepath.Join(out, "_pkg_.a")},
		Files:   res.Files,
		Sources: res.Sources,
		Asm:     res.Asm,
	}
	if err := step.Run(); err != nil {
		t.Fatalf("compile step: %v\n%s", err, log.Bytes())
	}
	// The stubs' object is a member of the package archive, which binutils
	// reads like any ar archive.
	ar, err := exec.LookPath("ar")
	if err != nil {
		t.Skipf("no ar to list the archive: %v", err)
	}
	members, err := exec.Command(ar, "t", filepath.Join(out, "_pkg_.a")).Output()
	if err != nil {
		t.Fatalf("ar t: %v", err)
	}
	if got := strings.Fields(string(members)); len(got) == 0 || got[len(got)-1] != "usdt_probes.o" {
		t.Errorf("archive members %q, want the stubs' usdt_probes.o last", got)
	}
}

// TestGoReceiver checks what the probe table records of each receiver
// for trace's labels (autoprobe.Label).
func TestGoReceiver(t *testing.T) {
	for _, tt := range []struct{ decl, want string }{
		{"func F() {}", ""},
		{"func (c Cache) Get() {}", ""},
		{"func (c *Cache) Get() {}", "*"},
		{"func (*Cache) Get() {}", "*"},
		{"func (c (*Cache)) Get() {}", "*"},
		{"func (l List[T]) Len() {}", "[...]"},
		{"func (l *List[T]) Len() {}", "*[...]"},
		{"func (m *Map[K, V]) Len() {}", "*[...]"},
	} {
		if got := rewrite.GoReceiver(tt.decl); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.decl, got, tt.want)
		}
	}
}

// TestSwitch checks what testdata/switch's functions get: those whose rule
// says sites: switch are left as they are, byte for byte, each with a
// traced copy of autoprobe.SwitchName's name; those that cannot be copied are probed
// as sites: code probes them, and say why.
func TestSwitch(t *testing.T) {
	dir := filepath.Join("testdata", "switch")
	r, err := rules.Load(filepath.Join(dir, "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "input.go")
	res, err := rewrite.Package(rewrite.Config{ImportPath: "example.com/shop", Files: []string{input}, GOARCH: "amd64", Rules: r, GoidOffset: 152, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	switched := map[string]string{"Cart.Add": "usdtSwitched_Add", "Cart.Len": "usdtSwitched_Len", "Total": "usdtSwitched_Total", "Fee": "usdtSwitched_Fee", "Discount": "usdtSwitched_Discount", "Cart.First": "usdtSwitched_First", "Cart.first": "usdtSwitched_first"}
	noSwitch := map[string]string{"Safe": "it calls recover", "Max": "it is generic", "Taken": "the package already uses the name of its copy, usdtSwitched_Taken"}
	for _, fn := range res.Funcs {
		switch {
		case fn.Switch:
			if switched[fn.Name] == "" || fn.Traced != switched[fn.Name] || fn.NoSwitch != "" {
				t.Errorf("%s: switched, copy %q (NoSwitch %q)", fn.Name, fn.Traced, fn.NoSwitch)
			}
			delete(switched, fn.Name)
		case fn.NoSwitch != "":
			if want := noSwitch[fn.Name]; want == "" || !strings.HasPrefix(fn.NoSwitch, want) || fn.Entry == "" {
				t.Errorf("%s: not switched: %q, probes %q %q; want %q and probes", fn.Name, fn.NoSwitch, fn.Entry, fn.Exit, want)
			}
			delete(noSwitch, fn.Name)
		case fn.Name != "Checkout":
			t.Errorf("%s: neither switched nor said why not: %+v", fn.Name, fn)
		}
	}
	if len(switched) > 0 || len(noSwitch) > 0 {
		t.Errorf("functions missing: switched %v, not %v", switched, noSwitch)
	}
	// Each switched function's declaration is in the rewritten file as
	// it is in the input.
	src, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	var rewritten []byte
	for path, b := range res.Sources {
		if strings.HasPrefix(filepath.Base(path), "usdt_rewritten_") {
			rewritten = b
		}
	}
	decls := func(src []byte) map[string]string {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		texts := map[string]string{}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				texts[fd.Name.Name] = string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset])
			}
		}
		return texts
	}
	was, is := decls(src), decls(rewritten)
	for _, name := range []string{"Add", "Len", "Total", "Fee", "Discount"} {
		if was[name] == "" || is[name] != was[name] {
			t.Errorf("%s was\n%s\nand is\n%s", name, was[name], is[name])
		}
	}
}
