package rewrite

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/rules"
)

// Keys of the values the entry probe passes besides a rule's attributes:
// the W3C tracestate beside the traceparent (rules.ContextKey), and what
// the attributes that panicked said (see usdtAutoTry).
const (
	traceStateKey = "usdt.tracestate"
	panicKey      = "usdt.panic"
)

// attributes are the values a rule's attributes and context add to fd's
// entry probe, and the statements of the traced branch that evaluate
// them. A function that takes a *net/http.Request and has no context of
// its rule passes the request's traceparent and tracestate headers.
//
// Each expression is evaluated into a variable of its type, which the
// probe then passes as it would an argument of that type, in a function
// literal that usdtAutoTry calls, so that a panic (a nil pointer on the
// way) shows as the attribute's value instead of unwinding the program.
// The literal refers to copies of the parameters it uses, made in the
// traced branch: capturing a parameter the function assigns would take
// its address, and change how the untraced path is compiled.
func (g *generator) attributes(fset *token.FileSet, f *file, fd *ast.FuncDecl, sig *types.Signature, rule *rules.Rule) ([]value, []string, error) {
	exprs := slices.Clone(rule.Attributes)
	if rule.Context.Expr != "" {
		exprs = append(exprs, rule.Context)
	}
	params := map[types.Object]bool{}
	if sig.Recv() != nil {
		params[sig.Recv()] = true
	}
	for v := range sig.Params().Variables() {
		params[v] = true
	}
	// Where the traced branch goes: the parameters are in scope from the
	// body on, which the function's scope spans though the package was
	// checked without its bodies.
	at := fd.Body.Lbrace + 1
	var vals []value
	var decls, tries []string
	var shadow []string
	for _, a := range exprs {
		expr, err := parser.ParseExpr(a.Expr)
		if err != nil {
			return nil, nil, g.attributeError(a, fd, err.Error(), "")
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
		if err := types.CheckExpr(fset, g.pkg, at, expr, info); err != nil {
			msg := err.Error()
			var te types.Error
			if errors.As(err, &te) {
				msg = te.Msg
			}
			return nil, nil, g.attributeError(a, fd, msg, "an attribute is a Go expression over the function's receiver and parameters, as its body would write it")
		}
		tv := info.Types[expr]
		if !tv.IsValue() || tv.IsVoid() {
			return nil, nil, g.attributeError(a, fd, fmt.Sprintf("%s is not a value", a.Expr), "write an expression that has a value: a variable, a field, or a call that returns one")
		}
		t := types.Default(tv.Type)
		if _, isTuple := t.(*types.Tuple); isTuple {
			return nil, nil, g.attributeError(a, fd, fmt.Sprintf("%s has %d values", a.Expr, t.(*types.Tuple).Len()), "write an expression of one value")
		}
		if a.Key == rules.ContextKey && !isString(t) {
			return nil, nil, g.attributeError(a, fd, fmt.Sprintf("context %s has type %s, not string", a.Expr, t), `context yields the traceparent header's text, e.g. msg.Headers["traceparent"]`)
		}
		spelled, conv, ok := g.spell(fset, at, t)
		if !ok {
			return nil, nil, g.attributeError(a, fd, fmt.Sprintf("%s has type %s, which %s cannot name", a.Expr, t, fset.Position(fd.Pos()).Filename),
				"convert it to a type the file can name, e.g. string(...) or int64(...), or import the type's package in that file")
		}
		ast.Inspect(expr, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && params[info.Uses[id]] && !slices.Contains(shadow, id.Name) {
				shadow = append(shadow, id.Name)
			}
			return true
		})
		name := g.id("Attr%d", g.attrs)
		g.attrs++
		decls = append(decls, fmt.Sprintf("var %s %s", name, spelled))
		tries = append(tries, fmt.Sprintf("%sTry(%q, func() { %s = %s(%s) })", g.prefix, a.Key, name, conv, a.Expr))
		vals = append(vals, value{name, a.Key, t})
	}
	var code []string
	for _, n := range shadow {
		code = append(code, n+" := "+n)
	}
	code = append(code, decls...)
	if len(tries) > 0 {
		name := g.id("Panic%d", g.attrs)
		code = append(code, name+" := "+strings.Join(tries, " + "))
		vals = append(vals, value{name, panicKey, types.Typ[types.String]})
	}
	if rule.Context.Expr == "" {
		if r := httpRequest(sig); r != "" {
			parent, state := g.id("Attr%d", g.attrs), g.id("Attr%d", g.attrs+1)
			g.attrs += 2
			code = append(code, fmt.Sprintf(`var %s, %s %s; if %s != nil { %[1]s = %[4]s.Header.Get("Traceparent"); %[2]s = %[4]s.Header.Get("Tracestate") }`, parent, state, g.typ("string"), r))
			str := types.Typ[types.String]
			vals = append(vals, value{parent, rules.ContextKey, str}, value{state, traceStateKey, str})
		}
	}
	return vals, code, nil
}

func (g *generator) attributeError(a rules.Attribute, fd *ast.FuncDecl, msg, hint string) error {
	return &rules.Error{Pos: a.Pos, Msg: fmt.Sprintf("attribute %s of %s.%s: %s", a.Key, g.pkg.Path(), funcName(fd), msg), Hint: hint}
}

// spell writes t as code at pos can name it, and the conversion that
// gives a value of t that type: a basic type is named by the predeclared
// type under it, converted to, and any other as the file names it, if it
// can (an unexported type of another package, or one of a package the
// file does not import, it cannot).
func (g *generator) spell(fset *token.FileSet, pos token.Pos, t types.Type) (spelled, conv string, ok bool) {
	if b, isBasic := t.Underlying().(*types.Basic); isBasic {
		name := g.typ(types.Typ[b.Kind()].Name())
		return name, name, true
	}
	scope := g.pkg.Scope().Innermost(pos)
	qualify := func(p *types.Package) string {
		if p == g.pkg {
			return ""
		}
		for s := scope; s != nil; s = s.Parent() {
			for _, n := range s.Names() {
				if pn, isPkg := s.Lookup(n).(*types.PkgName); isPkg && g.real(pn.Imported()).Path() == p.Path() {
					return n
				}
			}
		}
		return "?"
	}
	spelled = types.TypeString(t, qualify)
	e, err := parser.ParseExpr(spelled)
	if err != nil {
		return "", "", false
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	if types.CheckExpr(fset, g.pkg, pos, e, info) != nil || !info.Types[e].IsType() || !types.Identical(info.Types[e].Type, t) {
		return "", "", false
	}
	return spelled, "", true
}

// httpRequest names the first parameter of sig that is a *net/http.Request,
// or "".
func httpRequest(sig *types.Signature) string {
	for v := range sig.Params().Variables() {
		p, ok := types.Unalias(v.Type()).(*types.Pointer)
		if !ok {
			continue
		}
		if n, ok := types.Unalias(p.Elem()).(*types.Named); ok && n.Obj().Name() == "Request" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "net/http" && v.Name() != "" && v.Name() != "_" {
			return v.Name()
		}
	}
	return ""
}

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}
