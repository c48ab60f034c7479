package rewrite

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
)

// TypeCheck type-checks Go files as Package does, for the tests that
// build with usdt-toolexec's compile step, which imports this package.
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
	_, _, err := typeCheck(cfg, fset, files)
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
