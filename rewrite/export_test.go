package rewrite

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
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
	_, _, err := typeCheck(cfg, fset, files, true)
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
