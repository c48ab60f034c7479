package rewrite

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"slices"
	"strings"
)

// TypeCheck type-checks Go files against export data as Package does, but
// function bodies too, as the compiler will: the tests check with it that
// their inputs and the rewritten files compile.
func TypeCheck(cfg Config, paths []string) error {
	fset := token.NewFileSet()
	var files []*file
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, &file{p, src, f})
	}
	_, _, _, err := typeCheck(cfg, fset, files, true, false)
	return err
}

// GoReceiver is goReceiver on the first function declared in src.
func GoReceiver(src string) string {
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package p\n"+src, parser.SkipObjectResolution)
	if err != nil {
		return "parse error: " + err.Error()
	}
	return goReceiver(f.Decls[0].(*ast.FuncDecl))
}

// SetStandInImports turns typeCheck's stand-in imports on or off, until
// the function it returns puts them back.
func SetStandInImports(on bool) (restore func()) {
	was := standInImports
	standInImports = on
	return func() { standInImports = was }
}

// Signatures type-checks Go files as Package does and returns the
// parameter types of every function they declare, aliases spelled out,
// by name.
func Signatures(cfg Config, paths []string) (map[string]string, error) {
	fset := token.NewFileSet()
	var files []*file
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, &file{p, src, f})
	}
	pkg, info, _, err := typeCheck(cfg, fset, files, false, true)
	if err != nil {
		return nil, err
	}
	sigs := map[string]string{}
	for id, obj := range info.Defs {
		if fn, ok := obj.(*types.Func); ok {
			params := fn.Signature().Params()
			var s []string
			for i := range params.Len() {
				s = append(s, types.TypeString(types.Unalias(params.At(i).Type()), types.RelativeTo(pkg)))
			}
			sigs[id.Name] = strings.Join(s, ", ")
		}
	}
	return sigs, nil
}

// DeclImports is declImports on the Go source src, with the placeholders
// as "name(path).Type".
func DeclImports(src string) (needed, behind []string, ok bool) {
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, false
	}
	n, b, ok := declImports([]*ast.File{f})
	for path, ph := range b {
		for typ := range ph.types {
			behind = append(behind, ph.name+"("+path+")."+typ)
		}
	}
	slices.Sort(behind)
	return slices.Sorted(maps.Keys(n)), behind, ok
}

// GuessName is guessName.
var GuessName = guessName
