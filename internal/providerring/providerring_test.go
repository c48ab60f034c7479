package providerring

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/asmgen"
	"github.com/go-usdt/usdt/internal/goidoff"
	"github.com/go-usdt/usdt/internal/provider"
	"github.com/go-usdt/usdt/internal/usdtgen"
)

const jobsD = `provider jobs {
	probe enqueued(long long id, const char *kind, int depth);
	probe tick();
	probe nine(int a, int b, int c, int d, int e, int f, int g, int h, int i);
	probe late(int a, int b, int c, int d, int e, int f, int g, int h, bool i);
};
`

// generated writes usdtgen's files for src into a directory and returns
// the path of its file for builds without cgo.
func generated(t *testing.T, src string) string {
	t.Helper()
	provs, err := provider.Parse("jobs.d", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	files, err := usdtgen.Generate(usdtgen.Config{Source: "jobs.d", Providers: provs, Package: "jobs", ImportPath: "example.com/jobs"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	nocgo := ""
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f.Name, "_nocgo.go") {
			nocgo = path
		}
	}
	return nocgo
}

var amd64 = asmgen.Runtime{Goid: 152, P: &goidoff.P{GM: 48, MP: 208, ID: 0, Procid: 72}}

func TestPackage(t *testing.T) {
	nocgo := generated(t, jobsD)
	other := filepath.Join(filepath.Dir(nocgo), "other.go")
	if err := os.WriteFile(other, []byte("package jobs\n\nfunc usdtFireMine() { mine() }\n\nfunc mine() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Package(Config{ImportPath: "example.com/jobs", Files: []string{nocgo, other}, OutDir: t.TempDir(), Arch: asmgen.AMD64, Runtime: amd64, DefineRing: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Probes, " "); got != "usdtFireJobsEnqueued usdtFireJobsTick usdtFireJobsNine" {
		t.Errorf("probes that write to the ring: %s, want enqueued's, tick's and nine's", got)
	}
	if len(res.Left) != 1 || !strings.Contains(res.Left[0], "usdtFireJobsLate: a bool past its 8th argument") {
		t.Errorf("left out %q, want late's, for its ninth argument, a bool", res.Left)
	}
	// other.go is no file of usdtgen's, whatever its names.
	if len(res.Files) != 3 || res.Files[1] != other {
		t.Fatalf("files %q: want the rewritten file, other.go, and the declarations", res.Files)
	}
	fset := token.NewFileSet()
	rewritten, decls := res.Sources[res.Files[0]], res.Sources[res.Files[2]]
	if _, err := parser.ParseFile(fset, res.Files[0], rewritten, 0); err != nil {
		t.Errorf("the rewritten file does not parse: %v\n%s", err, rewritten)
	}
	if _, err := parser.ParseFile(fset, res.Files[2], decls, 0); err != nil {
		t.Errorf("the declarations do not parse: %v\n%s", err, decls)
	}
	for _, want := range []string{
		// The arguments evaluated once, to the ring, then to the stub.
		"{ usdtRingArg0, usdtRingArg1, usdtRingArg2 := id, usdtBuf1.Set(kind), depth; usdtRing0(0, usdtRingArg0, usdtRingArg1, usdtRingArg2); usdtStubJobsEnqueued(usdtRingArg0, usdtRingArg1, usdtRingArg2) }",
		"{ usdtRing1(0); usdtStubJobsTick() }",
		// Past the eighth, a whole word: the writer reads it from the
		// stack.
		"usdtRing2(0, usdtRingArg0, usdtRingArg1, usdtRingArg2, usdtRingArg3, usdtRingArg4, usdtRingArg5, usdtRingArg6, usdtRingArg7, uint64(usdtRingArg8)); usdtStubJobsNine(",
	} {
		if !strings.Contains(string(rewritten), want) {
			t.Errorf("the rewritten file lacks %s:\n%s", want, rewritten)
		}
	}
	// Lines stay where they were: the rewritten file has the same
	// count, after its line directive.
	orig, _ := os.ReadFile(nocgo)
	if got, want := strings.Count(string(rewritten), "\n"), strings.Count(string(orig), "\n")+1; got != want {
		t.Errorf("the rewritten file has %d lines, want %d", got, want)
	}
	for _, want := range []string{
		"func usdtRing0(_ uintptr, a1 int64, a2 *byte, a3 int32)",
		"func usdtRing1(_ uintptr)",
		"func usdtRing2(_ uintptr, a1 int32, a2 int32, a3 int32, a4 int32, a5 int32, a6 int32, a7 int32, a8 int32, a9 uint64)",
		"usdtunsafe.Pointer(&usdtJobsTable.semaphores[0]), usdtunsafe.Pointer(&usdtJobsTable.semaphores[1]), usdtunsafe.Pointer(&usdtJobsTable.semaphores[2])}",
	} {
		if !strings.Contains(string(decls), want) {
			t.Errorf("the declarations lack %s:\n%s", want, decls)
		}
	}
	// enqueued's 3 words, the second a C string; tick's none.
	ns := regexp.QuoteMeta(strings.NewReplacer(".", "·", "/", "∕").Replace(asmgen.Namespace("example.com/jobs")))
	for _, want := range []string{
		`TEXT ` + ns + `ring0<ABIInternal>\(SB\), \d+, \$0\n\tCMPQ [^\n]+\n\tJNE off\n\tMOVQ \$515, R12\n\tMOVQ ` + ns + `providers\+16\(SB\), R13\n`,
		`TEXT ` + ns + `ring1<ABIInternal>\(SB\), \d+, \$0\n\tCMPQ [^\n]+\n\tJNE off\n\tMOVQ \$0, R12\n\tMOVQ ` + ns + `providers\+24\(SB\), R13\n`,
		`GLOBL usdt∕ring·ctl`,
	} {
		if !regexp.MustCompile(want).Match(res.Asm) {
			t.Errorf("the assembly does not match %s:\n%s", want, res.Asm)
		}
	}
}

// TestPackageShapes leaves alone what is not usdtgen's shape, in a file
// that says usdtgen wrote it.
func TestPackageShapes(t *testing.T) {
	const head = "// Code generated by usdtgen from x.d. DO NOT EDIT.\n\npackage jobs\n\nvar tab struct{ semaphores [4]uint16 }\n\n"
	for _, tt := range []struct {
		name, src, left string
	}{
		{"no gate", "func usdtFireA(x int64) { usdtStubA(x) }\n\nfunc usdtStubA(x int64)\n", "usdtFireA: no gate tests its semaphore"},
		{"no stub call", "func A(x int64) {\n\tif tab.semaphores[0] != 0 {\n\t\tusdtFireA(x)\n\t}\n}\n\nfunc usdtFireA(x int64) { _ = x }\n", "usdtFireA: its last statement calls no stub"},
		{"a stub of no words", "func A(x string) {\n\tif tab.semaphores[0] != 0 {\n\t\tusdtFireA(x)\n\t}\n}\n\nfunc usdtFireA(x string) { usdtStubA(x) }\n\nfunc usdtStubA(x []byte)\n", "usdtFireA: its stub's parameters are not one word each"},
		{"cgo without __cgo_", "func A(x int64) {\n\tif *_Cvar_sema != 0 {\n\t\tusdtFireA(x)\n\t}\n}\n\nfunc usdtFireA(x int64) { usdtStubA(x) }\n\nfunc usdtStubA(x int64)\n", "usdtFireA: its semaphore has no address at link time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x_usdt_nocgo.go")
			if err := os.WriteFile(path, []byte(head+tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := Package(Config{ImportPath: "example.com/jobs", Files: []string{path}, OutDir: t.TempDir(), Arch: asmgen.AMD64, Runtime: amd64})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Probes) != 0 || len(res.Left) != 1 || !strings.HasPrefix(res.Left[0], tt.left) {
				t.Errorf("probes %q, left %q: want none, and %q", res.Probes, res.Left, tt.left)
			}
			if res.Files != nil || res.Asm != nil {
				t.Errorf("with no probe to rewrite, files %q and assembly:\n%s", res.Files, res.Asm)
			}
		})
	}
}

func TestHas(t *testing.T) {
	nocgo := generated(t, jobsD)
	other := filepath.Join(t.TempDir(), "x.go")
	os.WriteFile(other, []byte("package jobs\n"), 0o644)
	if !Has([]string{other, nocgo}, nil) || Has([]string{other}, nil) {
		t.Errorf("Has is not true of usdtgen's file alone")
	}
	if !Has([]string{"mem.go"}, map[string][]byte{"mem.go": []byte("// Code generated by cmd/cgo; DO NOT EDIT.\n\n//line x.go:1:1\n// Code generated by usdtgen from x.d. DO NOT EDIT.\n")}) {
		t.Errorf("Has does not see usdtgen's notice below cgo's")
	}
}
