package rewrite

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/rules"
)

// allFuncs selects every function of the test package, entry and exit
// probes with arguments.
const allFuncs = "provider: hyg\nrules:\n  - package: example.com/shop\n"

// instrumentFiles writes files (name to source) into a directory and
// instruments every function of the package they make.
func instrumentFiles(t testing.TB, files map[string]string) (*Result, string, error) {
	t.Helper()
	r, err := rules.Parse("rules.yml", []byte(allFuncs))
	if err != nil {
		t.Fatal(err)
	}
	dir, out := t.TempDir(), t.TempDir()
	var paths []string
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	res, err := Package(Config{ImportPath: "example.com/shop", Files: paths, GOARCH: "amd64", Rules: r, GoidOffset: 152, OutDir: out})
	return res, out, err
}

// typeCheckFiles type-checks Go files that import at most unsafe.
func typeCheckFiles(paths []string) error {
	fset := token.NewFileSet()
	var asts []*ast.File
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		asts = append(asts, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", nil), Sizes: types.SizesFor("gc", "amd64")}
	_, err := conf.Check("example.com/shop", fset, asts, nil)
	return err
}

// TestHygiene instruments every function of packages that declare,
// import or use names generated code could collide with or be captured
// by, and compiles the result with the toolchain's compiler. Each case
// failed to build before the generated code became hygienic.
func TestHygiene(t *testing.T) {
	const kinds = `
type T struct{ n int }
type I interface{ M() }
func All(a int, b int8, c uint16, d uint32, e uint64, f uintptr, g bool, h string, i float32, j float64, k []int, l *T, m map[int]int, n chan int, o func(), p interface{}, q I, r error) (x int, y string, z []byte, w I) {
	return a, h, nil0(), q
}
func nil0() []byte { return []byte{} }
func Tiny(s string) string { return s }
`
	tests := []struct {
		name  string
		files map[string]string
		// skipped is what the Skipped reason must contain; empty when
		// the package must be instrumented.
		skipped string
	}{
		{
			name:  "own copy",
			files: map[string]string{"a.go": "package shop\nfunc copy(a, b []byte) {}\n" + kinds},
		},
		{
			name: "shadowed predeclared names",
			files: map[string]string{
				"a.go": "package shop\nconst uint64 = 1\ntype byte struct{}\nvar nil = 7\nfunc len(xs ...interface{}) int { return 3 }\nvar true, false = 0, 1\ntype any = int\nconst iota = 2\nfunc cap() {}\nfunc new() {}\nfunc make() {}\nfunc panic() {}\nfunc print() {}\nfunc append() {}\n",
				"b.go": "package shop\ntype uintptr struct{}\ntype rune struct{}\n" + strings.ReplaceAll(strings.ReplaceAll(kinds, "uint64", "uint"), "uintptr", "int"),
			},
		},
		{
			name:  "unsafe is a package variable",
			files: map[string]string{"a.go": "package shop\nvar unsafe = 1\n" + kinds},
		},
		{
			name: "generated names taken",
			files: map[string]string{
				"a.go": "package shop\nvar usdtAutoTable = 1\ntype usdtAuto_int64 struct{}\nfunc usdtAutoFire0() {}\nfunc Tiny_usdtTraced() {}\n" + kinds,
				"b.go": "package shop\nimport usdtAuto1Data \"unsafe\"\nvar _ = usdtAuto1Data.Sizeof(0)\n",
			},
		},
		{
			name: "parameters and imports that capture",
			files: map[string]string{
				"a.go": "package shop\nimport int64 \"unsafe\"\nimport . \"unsafe\"\nvar _ = int64.Sizeof(0) + Sizeof(0)\n" +
					"func F(usdtAutoTable, len int, unsafe string, uint8 []int, Tiny_usdtTraced bool) int { return usdtAutoTable + len }\n" +
					"func G(int64 int, usdtAuto1P0 *int) (usdtAutoR0 int) { return int64 }\n" + kinds,
			},
		},
		{
			name:    "every 64-bit integer name shadowed",
			files:   map[string]string{"a.go": "package shop\ntype int struct{}\ntype int64 struct{}\nfunc F(a int8) {}\n"},
			skipped: "declares int",
		},
		{
			name:    "uint16 shadowed",
			files:   map[string]string{"a.go": "package shop\ntype uint16 = bool\nfunc F(a int8) {}\n"},
			skipped: "declares uint16",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			dir := t.TempDir()
			for name, src := range tt.files {
				paths = append(paths, filepath.Join(dir, name))
				if err := os.WriteFile(paths[len(paths)-1], []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := typeCheckFiles(paths); err != nil {
				t.Fatalf("the case itself does not type-check: %v", err)
			}
			res, out, err := instrumentFiles(t, tt.files)
			if err != nil {
				t.Fatal(err)
			}
			if tt.skipped != "" {
				if res == nil || !strings.Contains(res.Skipped, tt.skipped) {
					t.Fatalf("Package = %+v, want it skipped saying %q", res, tt.skipped)
				}
				return
			}
			if res == nil || res.Skipped != "" {
				t.Fatalf("Package = %+v, want the package instrumented", res)
			}
			if err := typeCheckFiles(res.Files); err != nil {
				t.Fatalf("instrumented package does not type-check: %v", err)
			}
			compile(t, "amd64", out, res)
		})
	}
}
