package rewrite_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-usdt/usdt/internal/inlining"
	"github.com/go-usdt/usdt/rewrite"
	"github.com/go-usdt/usdt/rules"
)

// atReturns selects every function of the test package, entry and exit
// probes with arguments, the exit probe at the returns (the default);
// deferred does too, with unwind: true.
const (
	atReturns = "provider: hyg\nrules:\n  - package: example.com/shop\n"
	deferred  = atReturns + "    unwind: true\n"
	// inlined probes the functions the compiler inlines too: each is
	// split, its untraced body calling its traced copy.
	inlined = atReturns + "    inline: probe\n"
)

// writeFiles writes files (name to source) into a new directory and
// returns their paths, sorted.
func writeFiles(t testing.TB, files map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// instrumentAll instruments every function of the package the files make,
// as the rules file text says.
func instrumentAll(t testing.TB, paths []string, text string) (*rewrite.Result, string, error) {
	t.Helper()
	r, err := rules.Parse("rules.yml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cfg := rewrite.Config{ImportPath: "example.com/shop", Files: paths, ImportCfg: stdImportCfg(t), GOARCH: "amd64", Rules: r, GoidOffset: 152, OutDir: out}
	if text == inlined {
		// As if the compiler inlined every function: each is split,
		// its untraced body calling the traced copy through a helper.
		cfg.Inlined = func(want []inlining.Pos) map[inlining.Pos]inlining.Decision {
			all := map[inlining.Pos]inlining.Decision{}
			for _, p := range want {
				all[p] = inlining.Decision{Inlinable: true, Cost: 10}
			}
			return all
		}
	}
	res, err := rewrite.Package(cfg)
	return res, out, err
}

var (
	importCfgOnce sync.Once
	importCfg     string
	importCfgErr  error
)

// TestMain removes the import configuration the tests shared, which
// outlives any one test's temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if importCfg != "" {
		os.Remove(importCfg)
	}
	os.Exit(code)
}

// stdImportCfg returns an import configuration, as the go command gives
// the compiler, for the standard packages the corpus programs import.
func stdImportCfg(t testing.TB) string {
	t.Helper()
	importCfgOnce.Do(func() {
		args := append([]string{"list", "-deps", "-export", "-f", "{{if .Export}}packagefile {{.ImportPath}}={{.Export}}{{end}}"}, stdPackages...)
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			importCfgErr = fmt.Errorf("go list: %v", err)
			return
		}
		f, err := os.CreateTemp("", "usdt-rewrite-importcfg-")
		if err != nil {
			importCfgErr = err
			return
		}
		defer f.Close()
		importCfg = f.Name()
		_, importCfgErr = f.Write(out)
	})
	if importCfgErr != nil {
		t.Fatal(importCfgErr)
	}
	return importCfg
}

var stdPackages = []string{"errors", "fmt", "os", "path/filepath", "reflect", "runtime", "sort", "strings", "sync", "time"}

// written writes the files Package made, which the compile step passes
// through memory, and returns the package's files.
func written(t testing.TB, res *rewrite.Result) []string {
	t.Helper()
	for path, src := range res.Sources {
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return res.Files
}

// typeCheckFiles type-checks the Go files as the compiler will, importing
// the standard packages of stdImportCfg.
func typeCheckFiles(t testing.TB, paths []string) error {
	return rewrite.TypeCheck(rewrite.Config{ImportPath: "example.com/shop", ImportCfg: stdImportCfg(t), GOARCH: "amd64"}, paths)
}

const kinds = `
type T struct{ n int }
type I interface{ M() }
func All(a int, b int8, c uint16, d uint32, e uint64, f uintptr, g bool, h string, i float32, j float64, k []int, l *T, m map[int]int, n chan int, o func(), p interface{}, q I, r error) (x int, y string, z []byte, w I) {
return a, h, nil0(), q
}
func nil0() []byte { return []byte{} }
func Tiny(s string) string { return s }
`

type hygieneCase struct {
	name  string
	files map[string]string
	// skipped is what the Skipped reason must contain; empty when
	// the package must be instrumented.
	skipped string
}

var hygieneCases = []hygieneCase{
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
		// The deferred exit's type holds a boxed result's field among
		// the others, in the results' order (crypto/internal/fips140/ecdsa's
		// randomPoint).
		name:  "type parameter result between others",
		files: map[string]string{"a.go": "package shop\nfunc Pick[P any](n int) (k *int, p P, err error) {\n\tdefer func() {}()\n\treturn &n, p, nil\n}\n"},
	},
	{
		// A method expression of the receiver's type would name the
		// receiver (go-jsonnet's func (closure *closure) parameters()).
		name: "receiver named as its type",
		files: map[string]string{"a.go": "package shop\ntype closure struct{ p []int }\n" +
			"func (closure *closure) parameters() []int { return closure.p }\n" +
			"type Ring[T any] struct{ v T }\nfunc (Ring *Ring[T]) Get() T { return Ring.v }\n" +
			"type N int\nfunc (n N) Add(N int) int { return int(n) + N }\n"},
	},
	{
		// The semaphores' slots are uint32, which has no synonym.
		name:    "uint32 shadowed",
		files:   map[string]string{"a.go": "package shop\ntype uint32 = bool\nfunc F(a int8) {}\n"},
		skipped: "declares uint32",
	},
}

// TestHygiene instruments every function of packages that declare,
// import or use names generated code could collide with or be captured
// by, and compiles the result with the toolchain's compiler. Each case
// failed to build before the generated code became hygienic.
func TestHygiene(t *testing.T) {
	for _, tt := range hygieneCases {
		for _, text := range []string{deferred, atReturns, inlined} {
			name := tt.name
			switch text {
			case atReturns:
				name += ", unwind false"
			case inlined:
				name += ", inline probe"
			}
			t.Run(name, func(t *testing.T) { testHygiene(t, tt, text) })
		}
	}
}

func testHygiene(t *testing.T, tt hygieneCase, text string) {
	paths := writeFiles(t, tt.files)
	if err := typeCheckFiles(t, paths); err != nil {
		t.Fatalf("the case itself does not type-check: %v", err)
	}
	res, out, err := instrumentAll(t, paths, text)
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
	if err := typeCheckFiles(t, written(t, res)); err != nil {
		t.Fatalf("instrumented package does not type-check: %v", err)
	}
	compile(t, "amd64", out, res)
}

// TestInstrumentSources instruments every function of each hygiene case
// and of each program of ../testdata/corpus, as files of their own, and
// requires the instrumented package to type-check.
func TestInstrumentSources(t *testing.T) {
	var srcs []string
	for _, tt := range hygieneCases {
		for _, src := range tt.files {
			srcs = append(srcs, src)
		}
	}
	corpus, err := filepath.Glob(filepath.Join("..", "testdata", "corpus", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range corpus {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, string(src))
	}
	for i, src := range srcs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			paths := writeFiles(t, map[string]string{"a.go": src})
			if typeCheckFiles(t, paths) != nil {
				t.Skip("a file that type-checks only beside its package's others")
			}
			instrumentChecked(t, paths)
		})
	}
}

// FuzzInstrument instruments every function of a package that the
// fuzzer's bytes choose (genPackage): every choice makes a package that
// type-checks, so that each input reaches the instrumenter, which must
// make a package that type-checks too, whatever the signatures and
// bodies.
func FuzzInstrument(f *testing.F) {
	for _, seed := range []string{"", "\x00", "\x03\x11\x22\x33\x44\x55", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6", "generic methods and deferred recovers", strings.Repeat("\x07\x05\x03", 20)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, choices []byte) {
		src := genPackage(choices)
		paths := writeFiles(t, map[string]string{"a.go": src})
		if err := typeCheckFiles(t, paths); err != nil {
			t.Fatalf("genPackage made a package that does not type-check: %v\n%s", err, src)
		}
		instrumentChecked(t, paths)
	})
}

// instrumentChecked instruments every function of the package at paths,
// with the exit probes at the returns, deferred and inlined ones split,
// and requires each instrumented package to type-check.
func instrumentChecked(t *testing.T, paths []string) {
	t.Helper()
	for _, text := range []string{deferred, atReturns, inlined} {
		res, _, err := instrumentAll(t, paths, text)
		if err != nil {
			t.Fatalf("instrumenting a package that type-checks: %v", err)
		}
		if res == nil || res.Skipped != "" {
			continue
		}
		if err := typeCheckFiles(t, written(t, res)); err != nil {
			var gen []byte
			for _, p := range res.Files {
				b, _ := os.ReadFile(p)
				gen = append(append(gen, "\n==> "+filepath.Base(p)+"\n"...), b...)
			}
			t.Fatalf("instrumented package does not type-check (%q): %v\n%s", text, err, gen)
		}
	}
}

// genPackage writes a one-file package of package shop from choices,
// each byte choosing the next part (zero when they run out): functions,
// methods on a value or a pointer receiver, and generic functions, with
// parameters and results of many types (variadic, named, unnamed,
// blank), and bodies of defers, recovers, closures, goroutines, loops,
// labels, panics and returns, bare or not. Whatever the bytes, the
// package type-checks.
func genPackage(choices []byte) string {
	next := func() int {
		if len(choices) == 0 {
			return 0
		}
		c := int(choices[0])
		choices = choices[1:]
		return c
	}
	type typ struct{ name, zero string }
	types := []typ{
		{"int", "0"}, {"string", `""`}, {"[]byte", "nil"}, {"error", "nil"}, {"any", "nil"},
		{"*Box", "nil"}, {"Box", "Box{}"}, {"map[string]int", "nil"}, {"func() int", "nil"},
		{"[3]int16", "[3]int16{}"}, {"chan int", "nil"}, {"float64", "0"}, {"bool", "false"},
		{"uintptr", "0"}, {"struct{ A, B int }", "struct{ A, B int }{}"}, {"complex128", "0"},
	}
	var b strings.Builder
	b.WriteString("package shop\n\nimport \"errors\"\n\nvar errNo = errors.New(\"no\")\n\ntype Box struct {\n\tN int\n\tS string\n}\n")
	funcs := 1 + next()%5
	for f := range funcs {
		kind := next() % 4
		recv, tparams, name := "", "", fmt.Sprintf("F%d", f)
		switch kind {
		case 1:
			recv = "(b Box) "
		case 2:
			recv = "(b *Box) "
		case 3:
			tparams = "[T any]"
		}
		var params []string
		var paramNames []string
		for p := range next() % 5 {
			t := types[next()%len(types)].name
			if kind == 3 && next()%2 == 0 {
				t = "T"
			}
			pname := fmt.Sprintf("p%d", p)
			if next()%5 == 0 {
				pname = "_"
			} else {
				paramNames = append(paramNames, pname)
			}
			params = append(params, pname+" "+t)
		}
		if next()%4 == 0 {
			params = append(params, "rest ...int")
			paramNames = append(paramNames, "rest")
		}
		var results []typ
		for range next() % 4 {
			results = append(results, types[next()%len(types)])
		}
		named := len(results) > 0 && next()%2 == 0
		var res string
		switch {
		case len(results) == 0:
		case named:
			var rs []string
			for i, r := range results {
				rs = append(rs, fmt.Sprintf("r%d %s", i, r.name))
			}
			res = " (" + strings.Join(rs, ", ") + ")"
		case len(results) == 1:
			res = " " + results[0].name
		default:
			var rs []string
			for _, r := range results {
				rs = append(rs, r.name)
			}
			res = " (" + strings.Join(rs, ", ") + ")"
		}
		fmt.Fprintf(&b, "\nfunc %s%s%s(%s)%s {\n", recv, name, tparams, strings.Join(params, ", "), res)
		for _, p := range paramNames {
			fmt.Fprintf(&b, "\t_ = %s\n", p)
		}
		if recv != "" {
			b.WriteString("\t_ = b.N\n")
		}
		ret := "\treturn\n"
		if len(results) > 0 && !named {
			var zs []string
			for _, r := range results {
				zs = append(zs, r.zero)
			}
			ret = "\treturn " + strings.Join(zs, ", ") + "\n"
		}
		for s := range next() % 6 {
			switch next() % 10 {
			case 0:
				b.WriteString("\tdefer func() { _ = recover() }()\n")
			case 1:
				fmt.Fprintf(&b, "\tfor i := range %d {\n\t\tif i > 1 {\n\t\t\tbreak\n\t\t}\n\t}\n", next()%4)
			case 2:
				b.WriteString("\tgo func() {}()\n")
			case 3:
				fmt.Fprintf(&b, "\tif len(%q) > 3 {\n%s\t}\n", strings.Repeat("x", next()%6), "\t"+ret)
			case 4:
				b.WriteString("\tif errNo == nil {\n\t\tpanic(errNo)\n\t}\n")
			case 5:
				fmt.Fprintf(&b, "\tc%d := func() int { return %d }\n\t_ = c%d()\n", s, next(), s)
			case 6:
				fmt.Fprintf(&b, "\tswitch %d {\n\tcase 1:\n%s\tdefault:\n\t}\n", next()%3, "\t"+ret)
			case 7:
				fmt.Fprintf(&b, "\tdefer func(n int) { _ = n }(%d)\n", next())
			case 8:
				fmt.Fprintf(&b, "L%d:\n\tfor {\n\t\tbreak L%d\n\t}\n", s, s)
			case 9:
				if named {
					b.WriteString("\tdefer func() {\n")
					for i := range results {
						fmt.Fprintf(&b, "\t\t_ = r%d\n", i)
					}
					b.WriteString("\t}()\n")
				}
			}
		}
		b.WriteString(ret)
		b.WriteString("}\n")
	}
	return b.String()
}

// TestRecoverNotSplit: recover stops a panic only when the deferred
// function calls it itself, so a tiny function that calls it must keep
// its probes in its own body (while traced, a split copy would be the
// caller of recover, and the panic would go on).
func TestRecoverNotSplit(t *testing.T) {
	paths := writeFiles(t, map[string]string{"a.go": "package shop\nfunc Rec(p *interface{}) { *p = recover() }\nfunc Tiny() int { return 1 }\n"})
	res, _, err := instrumentAll(t, paths, deferred)
	if err != nil {
		t.Fatal(err)
	}
	split := map[string]string{}
	for _, fn := range res.Funcs {
		split[fn.Name] = fn.Traced
	}
	if split["Rec"] != "" || split["Tiny"] == "" {
		t.Errorf("traced copies %v, want one for Tiny only", split)
	}
}

// usdtgen's probe functions get no probes of their own from a rule over
// their package; the user's functions beside them do.
func TestUsdtgenFilesNotInstrumented(t *testing.T) {
	paths := writeFiles(t, map[string]string{
		"a.go":             "package shop\nfunc Buy(n int) int { return n }\n",
		"shop_usdt_gen.go": "// Code generated by usdtgen from shop.d. DO NOT EDIT.\n\npackage shop\nfunc ShopSold(n int64) {}\n",
	})
	res, _, err := instrumentAll(t, paths, deferred)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fn := range res.Funcs {
		names = append(names, fn.Name)
	}
	if len(names) != 1 || names[0] != "Buy" {
		t.Errorf("instrumented %v, want [Buy]", names)
	}
}
