package rewrite

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/rules"
)

// autoProbe is one generated probe: its stub takes the goroutine id, then
// args.
type autoProbe struct {
	name  string
	args  []probe.Kind
	index int
	// exit is set for exit probes: the deferred call reads the results
	// through exit.fields pointers with the exit.args expressions.
	exit *exitReader
}

type exitReader struct {
	fields int
	args   []string
}

type generator struct {
	pkg      *types.Package
	provider string
	probes   []autoProbe
}

func (g *generator) add(name string, args []probe.Kind) int {
	g.probes = append(g.probes, autoProbe{name: name, args: args, index: len(g.probes)})
	return len(g.probes) - 1
}

// value is a variable a probe passes: its name once the signature has one.
type value struct {
	name string
	typ  types.Type
}

// instrument returns the edits that give fd its probes.
func (g *generator) instrument(fset *token.FileSet, f *file, fd *ast.FuncDecl, sig *types.Signature, rule *rules.Rule) (Func, []splice) {
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	name := funcName(fd)
	fn := Func{Name: name}
	var edits []splice

	// nameFields gives every parameter of a list a usable name: unnamed
	// and blank ones get prefix+index. Go forbids mixing named and
	// unnamed parameters, so a list is either all one or all the other.
	nameFields := func(list *ast.FieldList, prefix string, vars *types.Tuple, start int) []value {
		var vals []value
		i := start
		for _, field := range list.List {
			if len(field.Names) == 0 {
				n := fmt.Sprintf("%s%d", prefix, i)
				edits = append(edits, splice{at: off(field.Type.Pos()), text: n + " "})
				vals = append(vals, value{n, vars.At(i - start).Type()})
				i++
				continue
			}
			for _, id := range field.Names {
				n := id.Name
				if n == "_" {
					n = fmt.Sprintf("%s%d", prefix, i)
					edits = append(edits, splice{at: off(id.Pos()), del: 1, text: n})
				}
				vals = append(vals, value{n, vars.At(i - start).Type()})
				i++
			}
		}
		return vals
	}

	var prologue []string
	if rule.Entry {
		var vals []value
		if rule.Args {
			if fd.Recv != nil && sig.Recv() != nil {
				vals = append(vals, nameFields(fd.Recv, "usdtRecv", types.NewTuple(sig.Recv()), 0)...)
			}
			if fd.Type.Params != nil {
				vals = append(vals, nameFields(fd.Type.Params, "usdtP", sig.Params(), 0)...)
			}
		}
		kinds, exprs, dropped := g.pass(vals)
		fn.Dropped += dropped
		fn.Entry = probeName("entry", g.pkg.Name(), name)
		i := g.add(fn.Entry, kinds)
		prologue = append(prologue, fmt.Sprintf("if usdtAutoTable.semaphores[%d] != 0 { usdtAutoFire%d(%s) }", i, i, strings.Join(exprs, ", ")))
	}
	if rule.Exit {
		var vals []value
		if rule.Args && fd.Type.Results != nil && sig.Results().Len() > 0 {
			res := fd.Type.Results
			if !res.Opening.IsValid() {
				// A lone unnamed result needs parentheses to get a name.
				edits = append(edits, splice{at: off(res.List[0].Type.Pos()), text: "("}, splice{at: off(res.List[0].Type.End()), text: ")"})
			}
			vals = nameFields(res, "usdtR", sig.Results(), 0)
		}
		kinds, exprs, ptrs, dropped := g.passAt(vals)
		fn.Dropped += dropped
		fn.Exit = probeName("exit", g.pkg.Name(), name)
		i := g.add(fn.Exit, kinds)
		g.probes[i].exit = &exitReader{fields: len(ptrs), args: exprs}
		// Registered first, the deferred call runs last: after any
		// recover in the function has set the final results. It is a
		// method value of a generated type that holds the results'
		// addresses, not a func literal: a literal would be the
		// function's func1 and renumber the user's closures (main.f.func1
		// would become main.f.func2 in tracebacks and profiles), and
		// deferring a call with arguments would renumber its deferwraps.
		prologue = append(prologue, fmt.Sprintf("if usdtAutoTable.semaphores[%d] != 0 { usdtAutoExit := usdtAutoExit%d{%s}.fire; defer usdtAutoExit() }", i, i, strings.Join(ptrs, ", ")))
	}
	edits = append(edits, splice{at: off(fd.Body.Lbrace) + 1, text: strings.Join(prologue, "; ") + "; "})
	return fn, edits
}

// pass converts values to probe arguments, keeping room for the goroutine
// id in arg0 and dropping what does not fit the note.
func (g *generator) pass(vals []value) (kinds []probe.Kind, exprs []string, dropped int) {
	for i, v := range vals {
		if i >= probe.MaxArgs-1 {
			return kinds, exprs, len(vals) - i
		}
		k, e := convert(v.typ, v.name)
		kinds = append(kinds, k)
		exprs = append(exprs, e)
	}
	return kinds, exprs, 0
}

// passAt is pass for the exit probe's deferred call: each value is read
// through its address, held in a field of the generated usdtAutoExitN
// type. It returns the addresses to store, in field order.
func (g *generator) passAt(vals []value) (kinds []probe.Kind, exprs, ptrs []string, dropped int) {
	for i, v := range vals {
		if i >= probe.MaxArgs-1 {
			return kinds, exprs, ptrs, len(vals) - i
		}
		k, e, ok := convertAt(v.typ, fmt.Sprintf("usdtAutoData(x.a%d)", len(ptrs)+1))
		if ok {
			ptrs = append(ptrs, "&"+v.name)
		}
		kinds = append(kinds, k)
		exprs = append(exprs, e)
	}
	return kinds, exprs, ptrs, 0
}
