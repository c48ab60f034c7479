package rewrite

import (
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"sort"
	"strings"
)

// prune drops from the support file src (in canonical names) the helper
// declarations nothing uses: neither the code spliced into the package's
// files (spliced, in the package's prefix), nor a declaration that stays.
// The compiler emits every function of a package, used or not, and the
// linker loads each one with its tables before it finds it dead: a dozen
// helpers in each of 216 packages were 1,700 such functions. A helper is
// a function or a type (with its methods) named with the canonical prefix;
// usdtAutoPointer stays, since the unsafe import it names must be used.
func (g *generator) prune(src []byte, spliced string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// helper names the helper each declaration defines, "" for those that
	// always stay.
	helper := func(d ast.Decl) string {
		var name string
		switch d := d.(type) {
		case *ast.FuncDecl:
			name = d.Name.Name
			if d.Recv != nil {
				t := d.Recv.List[0].Type
				if star, ok := t.(*ast.StarExpr); ok {
					t = star.X
				}
				id, ok := t.(*ast.Ident)
				if !ok {
					return ""
				}
				name = id.Name
			}
		case *ast.GenDecl:
			if d.Tok != token.TYPE || len(d.Specs) != 1 {
				return ""
			}
			name = d.Specs[0].(*ast.TypeSpec).Name.Name
		}
		if !strings.HasPrefix(name, canonical) || name == canonical+"Pointer" {
			return ""
		}
		return name
	}

	used := map[string]bool{}
	var work []string
	use := func(name string) {
		if strings.HasPrefix(name, canonical) && !used[name] {
			used[name] = true
			work = append(work, name)
		}
	}
	var s scanner.Scanner
	s.Init(token.NewFileSet().AddFile("", -1, len(spliced)), []byte(spliced), nil, 0)
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.IDENT && strings.HasPrefix(lit, g.prefix) {
			use(canonical + lit[len(g.prefix):])
		}
	}
	uses := func(d ast.Decl) {
		ast.Inspect(d, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				use(id.Name)
			}
			return true
		})
	}
	byHelper := map[string][]ast.Decl{}
	for _, d := range f.Decls {
		if h := helper(d); h != "" {
			byHelper[h] = append(byHelper[h], d)
		} else {
			uses(d)
		}
	}
	for len(work) > 0 {
		name := work[len(work)-1]
		work = work[:len(work)-1]
		for _, d := range byHelper[name] {
			uses(d)
		}
	}

	// Cut each unused declaration with its doc comment, from the end so
	// that the offsets before stay right.
	type cut struct{ from, to int }
	var cuts []cut
	for name, decls := range byHelper {
		if used[name] {
			continue
		}
		for _, d := range decls {
			from := d.Pos()
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Doc != nil {
					from = d.Doc.Pos()
				}
			case *ast.GenDecl:
				if d.Doc != nil {
					from = d.Doc.Pos()
				}
			}
			cuts = append(cuts, cut{fset.Position(from).Offset, fset.Position(d.End()).Offset})
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].from > cuts[j].from })
	out := append([]byte(nil), src...)
	for _, c := range cuts {
		out = append(out[:c.from], out[c.to:]...)
	}
	return out, nil
}
