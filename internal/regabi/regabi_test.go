package regabi

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"testing"
)

// TestAssign checks assignments against Go's own description of its ABI
// (src/cmd/compile/abi-internal.md), whose worked example is the first
// case, and against the rules it states for the others.
func TestAssign(t *testing.T) {
	const src = `package p

func example(a1 uint8, a2 [2]uintptr, a3 uint8) (r1 struct { x uintptr; y [2]uintptr }, r2 string) { return }

func mixed(x float64, s string, c complex128, p *int, e struct{}, one [1]int32, m map[int]int) {}

func many(a, b, c, d, e, f, g, h, i, j int, k bool) {}

func split(s struct{ a int; b float64 }, sl []byte, i interface{}) {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := func(name string) *types.Signature { return pkg.Scope().Lookup(name).Type().(*types.Signature) }
	types := func(tuple *types.Tuple) []types.Type {
		var ts []types.Type
		for v := range tuple.Variables() {
			ts = append(ts, v.Type())
		}
		return ts
	}
	regs := func(r ...string) Loc { return Loc{Ints: r} }
	stack := Loc{Stack: true}
	for _, tt := range []struct {
		name, arch string
		results    bool
		want       []Loc
	}{
		{"example", "amd64", false, []Loc{regs("%rax"), stack, regs("%rbx")}},
		{"example", "amd64", true, []Loc{stack, regs("%rax", "%rbx")}},
		{"mixed", "amd64", false, []Loc{{Floats: 1}, regs("%rax", "%rbx"), {Floats: 2}, regs("%rcx"), {}, regs("%rdi"), regs("%rsi")}},
		{"mixed", "arm64", false, []Loc{{Floats: 1}, regs("x0", "x1"), {Floats: 2}, regs("x2"), {}, regs("x3"), regs("x4")}},
		{"many", "amd64", false, []Loc{regs("%rax"), regs("%rbx"), regs("%rcx"), regs("%rdi"), regs("%rsi"),
			regs("%r8"), regs("%r9"), regs("%r10"), regs("%r11"), stack, stack}},
		{"many", "arm64", false, []Loc{regs("x0"), regs("x1"), regs("x2"), regs("x3"), regs("x4"),
			regs("x5"), regs("x6"), regs("x7"), regs("x8"), regs("x9"), regs("x10")}},
		{"split", "amd64", false, []Loc{{Ints: []string{"%rax"}, Floats: 1}, regs("%rbx", "%rcx", "%rdi"), regs("%rsi", "%r8")}},
	} {
		s := sig(tt.name)
		tuple := s.Params()
		if tt.results {
			tuple = s.Results()
		}
		got := Assign(tt.arch, types(tuple))
		for i := range got {
			if len(got[i].Ints) == 0 {
				got[i].Ints = nil
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s on %s (results %v):\ngot  %+v\nwant %+v", tt.name, tt.arch, tt.results, got, tt.want)
		}
	}
}
