package rewrite

import (
	"fmt"
	"go/ast"
	"go/scanner"
	"go/token"
	"go/types"
	"sort"
	"strings"
)

// Generated code must mean the same whatever the instrumented package
// declares and whatever its files mention. Two things keep it so:
//
//   - Every identifier it declares starts with a prefix that no identifier
//     of the package's files starts with, so a generated name can neither
//     collide with a declaration (package, file or import scope) nor be
//     captured by a parameter spliced code runs next to.
//   - Code spliced into user functions names no predeclared identifier:
//     it converts through aliases the generated file declares (usdtAuto_int64
//     for int64). The generated file itself only sees the package scope
//     and its own import, so there a predeclared name the package shadows
//     is replaced by an unshadowed synonym of the same size (int for int64
//     on 64-bit targets); when it has none, the package is left alone.

// canonical is the prefix generated code is written with; hygienic turns
// it into the package's prefix.
const canonical = "usdtAuto"

// choosePrefix returns the first of usdtAuto, usdtAuto1, usdtAuto2, ... that
// no identifier of the files starts with, and the set of those identifiers.
func choosePrefix(files []*file) (string, map[string]bool) {
	idents := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				idents[id.Name] = true
			}
			return true
		})
	}
	for i := 0; ; i++ {
		p := canonical
		if i > 0 {
			p += fmt.Sprint(i)
		}
		taken := false
		for id := range idents {
			if strings.HasPrefix(id, p) {
				taken = true
				break
			}
		}
		if !taken {
			return p, idents
		}
	}
}

// id is a generated identifier for spliced code: the package's prefix,
// then the name.
func (g *generator) id(format string, args ...interface{}) string {
	return g.prefix + fmt.Sprintf(format, args...)
}

// typ names the predeclared type name in spliced code, through the alias
// the generated file declares for it.
func (g *generator) typ(name string) string {
	g.aliases[name] = true
	return g.prefix + "_" + name
}

// aliasDecls declares the aliases typ handed out, in canonical names.
func (g *generator) aliasDecls() string {
	var names []string
	for n := range g.aliases {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\ntype %s_%s = %s\n", canonical, n, n)
	}
	return b.String()
}

// synonyms lists, for each predeclared type generated code names, the
// types that can stand for it: identical, or of the same size and kind on
// the 64-bit targets instrumentation supports (the stubs read machine
// words, and conversions between integer types keep the value).
var synonyms = map[string][]string{
	"int64":   {"int64", "int"},
	"int":     {"int", "int64"},
	"uint64":  {"uint64", "uint", "uintptr"},
	"uint":    {"uint", "uint64", "uintptr"},
	"uintptr": {"uintptr", "uint64", "uint"},
	"uint8":   {"uint8", "byte"},
	"byte":    {"byte", "uint8"},
	"int32":   {"int32", "rune"},
	"rune":    {"rune", "int32"},
}

// Shadowed is the error of a package whose generated code needs a
// predeclared name that the package declares for itself and that has no
// unshadowed synonym: such a package is compiled uninstrumented.
type Shadowed struct {
	Name string
}

func (e *Shadowed) Error() string {
	return fmt.Sprintf("the package declares %s, a predeclared name its probe code needs and cannot replace", e.Name)
}

// hygienic rewrites Go source written with the canonical prefix and
// predeclared names for g's package: identifiers starting with the
// canonical prefix get the package's prefix, unsafe is imported under a
// prefixed name, and each predeclared name the package shadows becomes an
// unshadowed synonym; //go:linkname directives follow their function's
// new name. Selectors (x.name) and the package clause are left as they are.
func (g *generator) hygienic(src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	tf := fset.AddFile("", -1, len(src))
	var s scanner.Scanner
	// Comments are scanned for the //go:linkname directives, which name a
	// generated function.
	s.Init(tf, src, nil, scanner.ScanComments)
	var b []byte
	last := 0
	prev := token.ILLEGAL
	replace := func(pos token.Pos, lit, with string) {
		off := tf.Offset(pos)
		b = append(append(b, src[last:off]...), with...)
		last = off + len(lit)
	}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.COMMENT {
			if rest, ok := strings.CutPrefix(lit, "//go:linkname "+canonical); ok {
				replace(pos, lit, "//go:linkname "+g.prefix+rest)
			}
			continue
		}
		switch {
		case tok == token.STRING && lit == `"unsafe"`:
			replace(pos, lit, g.prefix+"_unsafe "+lit)
		case tok != token.IDENT || prev == token.PERIOD || prev == token.PACKAGE:
		case strings.HasPrefix(lit, canonical):
			replace(pos, lit, g.prefix+lit[len(canonical):])
		case lit == "unsafe":
			replace(pos, lit, g.prefix+"_unsafe")
		case types.Universe.Lookup(lit) != nil && g.pkg.Scope().Lookup(lit) != nil:
			with := ""
			for _, syn := range synonyms[lit] {
				if g.pkg.Scope().Lookup(syn) == nil {
					with = syn
					break
				}
			}
			if with == "" {
				return nil, &Shadowed{lit}
			}
			replace(pos, lit, with)
		}
		prev = tok
	}
	return append(b, src[last:]...), nil
}

// isIdent reports whether e is the identifier name, in parentheses or not.
func isIdent(e ast.Expr, name string) bool {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name == name
		default:
			return false
		}
	}
}
