package rewrite

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strconv"
	"strings"

	"github.com/go-usdt/usdt/asmgen"
	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/rules"
)

// exitShape is a generated type whose fire method reads the results of a
// returning function through the addresses it holds and fires an exit
// probe: one per distinct way of reading results (or, through
// usdtAutoRead, per number of results), shared by every function that
// returns them that way.
type exitShape struct {
	fire   int
	fields int
	args   []string
	// boxes are the fields (from 1) that point at a value of a type
	// parameter, which fire boxes: each gets a type parameter of the
	// shape.
	boxes []int
}

type generator struct {
	pkg *types.Package
	// real gives the package an import of pkg stands for (see typeCheck).
	real     func(*types.Package) *types.Package
	provider string
	// probes are the generated probes, behind the trampoline the fire
	// functions share; a probe's site index is its index here.
	probes []probe.Probe
	// semaphores counts the semaphore slots: one per instrumented
	// function, shared by its entry and exit probes.
	semaphores int
	fires      []fireSig
	fireIndex  map[string]int
	exits      []exitShape
	exitIndex  map[string]int
	// sharedReads says an exit shape reads through usdtAutoRead.
	sharedReads bool
	// traced holds the names given to traced copies, as "Type.Name" for
	// methods.
	traced map[string]bool
	// prefix starts every generated identifier; idents holds every
	// identifier of the package's files; aliases, the predeclared types
	// spliced code names (see hygienic).
	prefix  string
	idents  map[string]bool
	aliases map[string]bool
	// sizes are the target's, which layouts are computed for;
	// staleLayouts says a layout met a stand-in or an invalid type.
	sizes        types.Sizes
	staleLayouts bool
	// copies numbers the copies probes pass the address of (see pass);
	// attrs, the variables rules' attributes are evaluated into.
	copies, attrs int
	// generics says the package's Go version has type parameters;
	// calls holds the helpers callHelper handed out.
	generics bool
	calls    map[string]string
	// notesOnly are the note-only probes (sites: notes), which have no
	// stub and go in a table of their own.
	notesOnly []probe.Probe
	// switched are the traced copies of the functions sites: switch
	// leaves as written, as Go expressions of the package (see
	// copiesFile).
	switched []string
}

func newGenerator(pkg *types.Package, real func(*types.Package) *types.Package, provider string, files []*file) *generator {
	prefix, idents := choosePrefix(files)
	return &generator{pkg: pkg, real: real, provider: provider, fireIndex: map[string]int{}, exitIndex: map[string]int{}, traced: map[string]bool{}, calls: map[string]string{},
		prefix: prefix, idents: idents, aliases: map[string]bool{}}
}

// fireSig is what a shared fire function takes after the site index:
// strings as strings and everything else as a uint64 (see convert), and
// what it does with the clock: with asmgen.ClockSince the first is an
// exit probe's start time, which it turns into the elapsed time the probe
// passes; with asmgen.ClockNow it returns the time after the probe fired,
// an exit probe's start time.
type fireSig struct {
	kinds []probe.Kind
	clock asmgen.Clock
}

// fire returns the shared fire function for arguments of these kinds,
// and whether it does with the clock what want asks: a trampoline that
// reads the clock takes at most asmgen.ClockWords.
func (g *generator) fire(kinds []probe.Kind, want asmgen.Clock) (int, asmgen.Clock) {
	passed := make([]probe.Kind, len(kinds))
	strs := false
	for i, k := range kinds {
		passed[i] = probe.Uint64
		if k == probe.String {
			passed[i] = probe.String
			strs = true
		}
	}
	sig := fireSig{passed, want}
	if !strs && len(passed) > asmgen.ClockWords {
		sig.clock = asmgen.NoClock
	}
	key := fmt.Sprint(sig.kinds, sig.clock)
	if i, ok := g.fireIndex[key]; ok {
		return i, sig.clock
	}
	g.fires = append(g.fires, sig)
	g.fireIndex[key] = len(g.fires) - 1
	return len(g.fires) - 1, sig.clock
}

func (g *generator) exit(fire, fields int, args []string, boxes []int) int {
	key := fmt.Sprint(fire, fields, args, boxes)
	if i, ok := g.exitIndex[key]; ok {
		return i
	}
	g.exits = append(g.exits, exitShape{fire, fields, args, boxes})
	g.exitIndex[key] = len(g.exits) - 1
	return len(g.exits) - 1
}

// add adds the probe name of the function fd, which passes the goroutine
// id and then args and has no room for dropped, with its semaphore in slot.
// An exit probe's fire function takes the start time instead of the
// elapsed time when it can; an entry probe's returns the time after it
// fired when now asks for it and it can (clock says).
func (g *generator) add(fd *ast.FuncDecl, name string, args, dropped []probe.Arg, slot int, now bool) (site, fire int, clock asmgen.Clock) {
	p := probe.Probe{Provider: g.provider, Name: name, Args: append([]probe.Arg{goidArg}, args...), Dropped: dropped, Slot: slot, Receiver: goReceiver(fd)}
	want := asmgen.NoClock
	switch {
	case len(args) > 0 && args[0] == elapsedArg:
		want = asmgen.ClockSince
	case now:
		want = asmgen.ClockNow
	}
	fire, clock = g.fire(p.Kinds()[1:], want)
	g.probes = append(g.probes, p)
	return len(g.probes) - 1, fire, clock
}

// goidArg and elapsedArg are what every automatic probe, and every exit
// probe, pass ahead of the function's values.
var (
	goidArg    = probe.Arg{Name: "goid", Type: "int64", Kind: probe.Int64}
	elapsedArg = probe.Arg{Name: "elapsed", Type: "time.Duration", Kind: probe.Int64}
)

// value is a variable a probe passes: its name once the signature has one,
// and declared, its name in the source ("_" for a blank one, empty for an
// unnamed one).
type value struct {
	name, declared string
	typ            types.Type
}

// arg describes v for the probe table, its type as the package writes it.
func (g *generator) arg(v value, k probe.Kind) probe.Arg {
	qualify := func(p *types.Package) string {
		if p == g.pkg {
			return ""
		}
		return p.Name()
	}
	// A struct tag may hold a NUL, which the table cannot.
	typ := strings.ReplaceAll(types.TypeString(v.typ, qualify), "\x00", `\x00`)
	a := probe.Arg{Name: v.declared, Type: typ, Kind: k}
	if k == probe.Pointer && boxed(v.typ) {
		a.Layout = boxLayout.Encode()
	} else if k == probe.Pointer && layout.Needed(v.typ) {
		l, ok := layout.Of(v.typ, g.sizes, func(n *types.Named) bool {
			p := n.Obj().Pkg()
			return p == nil || g.real(p) == p
		})
		g.staleLayouts = g.staleLayouts || !ok
		a.Layout = l.Encode()
	}
	return a
}

// instrumented is what instrument does to one function: edits of its
// text, and a function to append to the file.
type instrumented struct {
	fn     Func
	edits  []splice
	traced string
	err    error
}

// instrument gives fd its probes. One semaphore gates both: the kernel
// counts the tracers of either probe in it, so one branch decides whether
// anything fires.
//
// A small function that gets an exit probe is split in two, so that what
// runs untraced is the function as written plus one branch, and stays as
// inlinable as the inliner's budget allows: fd keeps its name and its body
// behind a test of the semaphore, and a copy of the body with the probes
// (and the deferred call the exit probe needs, which Go never inlines)
// becomes the function Name_usdtTraced that fd calls while it is traced.
//
// A function the compiler inlines as written (inlinable) is split too, so
// that what it inlines is its body and the test: the traced copy's call
// costs the inliner less than the probes would (see callHelper).
//
// A switched function (sites: switch, see switchable) gets the traced
// copy alone: fd is not edited at all, and nothing calls the copy.
func (g *generator) instrument(fset *token.FileSet, f *file, fd *ast.FuncDecl, obj *types.Func, rule *rules.Rule, inlinable, switched bool) instrumented {
	sig := obj.Type().(*types.Signature)
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	name := funcName(fd)
	fn := Func{Name: name, Switch: switched}
	var sigEdits, resultEdits []splice
	split := switched || inlinable && g.copyable(fd) || rule.Exit && g.splittable(f, fd)

	// nameFields gives every parameter of a list a usable name: unnamed
	// and blank ones get prefix+index. Go forbids mixing named and
	// unnamed parameters, so a list is either all one or all the other.
	nameFields := func(list *ast.FieldList, prefix string, vars *types.Tuple, edits *[]splice) []value {
		var vals []value
		i := 0
		for _, field := range list.List {
			if len(field.Names) == 0 {
				n := fmt.Sprintf("%s%d", prefix, i)
				*edits = append(*edits, splice{At: off(field.Type.Pos()), Text: n + " "})
				vals = append(vals, value{n, "", vars.At(i).Type()})
				i++
				continue
			}
			for _, id := range field.Names {
				n := id.Name
				if n == "_" {
					n = fmt.Sprintf("%s%d", prefix, i)
					*edits = append(*edits, splice{At: off(id.Pos()), Del: 1, Text: n})
				}
				vals = append(vals, value{n, id.Name, vars.At(i).Type()})
				i++
			}
		}
		return vals
	}

	var recv, params []value
	if rule.Entry && rule.Args || split {
		if fd.Recv != nil && sig.Recv() != nil {
			recv = nameFields(fd.Recv, g.id("Recv"), types.NewTuple(sig.Recv()), &sigEdits)
		}
		if fd.Type.Params != nil {
			params = nameFields(fd.Type.Params, g.id("P"), sig.Params(), &sigEdits)
		}
	}

	sem := g.semaphores
	g.semaphores++
	var fire []string
	// now is what gives an exit probe its start time: the entry probe's
	// fire function when it returns the time, else the clock.
	now := g.prefix + "Now()"
	if rule.Entry {
		var vals []value
		if rule.Args {
			vals = append(append(vals, recv...), params...)
		}
		attrs, eval, err := g.attributes(fset, f, fd, sig, rule)
		if err != nil {
			return instrumented{err: err}
		}
		// The attributes were asked for by name: the arguments give them
		// room.
		var over []probe.Arg
		if room := probe.MaxArgs - 1 - len(attrs); len(vals) > room {
			over = g.drop(vals[room:])
			vals = vals[:room]
		}
		args, exprs, copies, dropped := g.pass(append(vals, attrs...))
		dropped = append(over, dropped...)
		fn.Dropped += len(dropped)
		fire = append(fire, eval...)
		fire = append(fire, copies...)
		fn.Entry = autoprobe.Name("entry", g.pkg.Name(), name)
		site, fireFn, clock := g.add(fd, fn.Entry, args, dropped, sem, rule.Exit)
		call := fmt.Sprintf("%sFire%d(%s)", g.prefix, fireFn, strings.Join(append([]string{fmt.Sprint(site)}, exprs...), ", "))
		if clock == asmgen.ClockNow {
			now = call
		} else {
			fire = append(fire, call)
		}
	}
	// join turns the returns into jumps to one return at the end of the
	// body; atReturn fires the exit probe there instead of in a deferred
	// call (unwind: false).
	var returns []*ast.ReturnStmt
	join, atReturn := false, false
	if rule.Exit {
		var why string
		returns, why = g.joinable(fd)
		exits := len(returns)
		if sig.Results().Len() == 0 {
			exits++ // at the end of the body too
		}
		if why == "" && exits == 0 {
			why = "it never returns"
		}
		atReturn = why == "" && !rule.Unwind
		join = why == "" && (exits >= 2 || atReturn)
		if !rule.Unwind && !atReturn {
			fn.Deferred = why
		}
	}
	var results []value
	if (rule.Exit && rule.Args || join) && fd.Type.Results != nil && sig.Results().Len() > 0 {
		res := fd.Type.Results
		if !res.Opening.IsValid() {
			// A lone unnamed result needs parentheses to get a name.
			resultEdits = append(resultEdits, splice{At: off(res.List[0].Type.Pos()), Text: "("}, splice{At: off(res.List[0].Type.End()), Text: ")"})
		}
		results = nameFields(res, g.id("R"), sig.Results(), &resultEdits)
	}
	var exitFire, start string
	if rule.Exit {
		var vals []value
		if rule.Args {
			vals = results
		}
		fn.Exit = autoprobe.Name("exit", g.pkg.Name(), name)
		if atReturn {
			var dropped []probe.Arg
			if len(vals) > probe.MaxArgs-2 {
				dropped = g.drop(vals[probe.MaxArgs-2:])
				vals = vals[:probe.MaxArgs-2]
			}
			args, exprs, copies, _ := g.pass(vals)
			fn.Dropped += len(dropped)
			site, fireFn, clock := g.add(fd, fn.Exit, append([]probe.Arg{elapsedArg}, args...), dropped, sem, false)
			// The start time is taken after the entry probe fired, and is
			// zero unless the semaphore was set then: a call that began
			// untraced fires no exit probe, as with the deferred call.
			start = g.id("Start")
			fire = append(fire, start+" = "+now)
			elapsed := start
			if clock != asmgen.ClockSince {
				elapsed = fmt.Sprintf("%sSince(%s)", g.prefix, start)
			}
			call := fmt.Sprintf("%sFire%d(%s)", g.prefix, fireFn, strings.Join(append([]string{fmt.Sprint(site), elapsed}, exprs...), ", "))
			exitFire = fmt.Sprintf("if %s != 0 { %s }; ", start, strings.Join(append(copies, call), "; "))
		} else {
			x := g.passAt(vals)
			fn.Dropped += len(x.dropped)
			args := append([]probe.Arg{elapsedArg}, x.args...)
			site, fireFn, clock := g.add(fd, fn.Exit, args, x.dropped, sem, false)
			elapsed := "x.start"
			if clock != asmgen.ClockSince {
				elapsed = "usdtAutoSince(x.start)"
			}
			exprs, held, shared := x.fire(site)
			g.sharedReads = g.sharedReads || shared
			exprs = slices.Insert(exprs, 1, elapsed)
			shape := g.exit(fireFn, len(x.ptrs), exprs, x.boxes())
			typeArgs := ""
			if len(x.typeArgs) > 0 {
				typeArgs = "[" + strings.Join(x.typeArgs, ", ") + "]"
			}
			// Registered first, the deferred call runs last: after any
			// recover in the function has set the final results. It is a
			// method value of a generated type that holds the results'
			// addresses, not a func literal: a literal would be the
			// function's func1 and renumber the user's closures (main.f.func1
			// would become main.f.func2 in tracebacks and profiles), and
			// deferring a call with arguments would renumber its deferwraps.
			// It also carries the start time, taken after the entry probe
			// fired, so that each call (recursive ones included) measures
			// itself; a panic unwinding through the function runs it too.
			fire = append(fire, fmt.Sprintf("%[1]sExit := %[1]sExit%[2]d%[3]s{%[4]s}.fire; defer %[1]sExit()", g.prefix, shape, typeArgs, strings.Join(append([]string{held, now}, x.ptrs...), ", ")))
		}
	}
	// bodyEdits turn the returns into jumps to one return at the end of
	// the body, which gets a block of its own: a jump may not skip
	// declarations in the label's block.
	var bodyEdits []splice
	opening := ""
	if join {
		var names []string
		for _, v := range results {
			names = append(names, v.name)
		}
		end := exitFire + "return "
		if len(returns) > 0 {
			label := g.id("Return")
			end = label + ": " + end
			for _, r := range returns {
				if len(r.Results) == 0 {
					bodyEdits = append(bodyEdits, splice{At: off(r.Pos()), Del: len("return"), Text: "goto " + label})
					continue
				}
				bodyEdits = append(bodyEdits, splice{At: off(r.Pos()), Del: len("return"), Text: "{ " + strings.Join(names, ", ") + " ="},
					splice{At: off(r.End()), Text: "; goto " + label + " }"})
			}
		}
		opening = "{ "
		bodyEdits = append(bodyEdits, splice{At: off(fd.Body.Rbrace), Text: "}; " + end})
	}
	gate := fmt.Sprintf("if %sTable.semaphores[%d] != 0 { ", g.prefix, sem)
	probes := gate + strings.Join(fire, "; ") + " }; "
	if start != "" {
		probes = "var " + start + " " + g.typ("int64") + "; " + probes
	}
	if !split {
		edits := append(sigEdits, resultEdits...)
		edits = append(edits, splice{At: off(fd.Body.Lbrace) + 1, Text: probes + opening})
		edits = append(edits, bodyEdits...)
		return instrumented{fn: fn, edits: edits}
	}

	text := func(n ast.Node, edits []splice) string {
		return applySplices(f.src, off(n.Pos()), off(n.End()), edits)
	}
	var tracedName string
	if switched {
		// Reserved by switchable.
		tracedName = autoprobe.SwitchName(fd.Name.Name)
	} else {
		tracedName = g.tracedName(fd, sig)
	}
	fn.Traced = tracedName
	var edits []splice
	if !switched {
		edits = g.callTraced(fd, sig, tracedName, text, recv, params, inlinable, sigEdits,
			splice{At: off(fd.Body.Lbrace) + 1, Text: gate})
	}

	// The copy goes at the end of the file; line directives give its
	// declaration and its body the original's positions, in the file
	// named last (the original's, also in files cgo or cover rewrote).
	var b strings.Builder
	b.WriteString("\n")
	for _, d := range directives(fd) {
		if d != "//go:noinline" {
			b.WriteString("\n" + d)
		}
	}
	fnPos := fset.Position(fd.Pos())
	fmt.Fprintf(&b, "\n/*line :%d:%d*/func ", fnPos.Line, fnPos.Column)
	if fd.Recv != nil {
		b.WriteString(text(fd.Recv, sigEdits) + " ")
	}
	b.WriteString(tracedName)
	if fd.Type.TypeParams != nil {
		b.WriteString(text(fd.Type.TypeParams, nil))
	}
	b.WriteString(text(fd.Type.Params, sigEdits))
	if fd.Type.Results != nil {
		b.WriteString(" " + text(fd.Type.Results, resultEdits))
	}
	lbrace := fset.Position(fd.Body.Lbrace)
	fmt.Fprintf(&b, " /*line :%d:%d*/{%s%s", lbrace.Line, lbrace.Column, probes, opening)
	b.WriteString(applySplices(f.src, off(fd.Body.Lbrace)+1, off(fd.Body.Rbrace)+1, bodyEdits))
	return instrumented{fn: fn, edits: edits, traced: b.String()}
}

// callTraced returns the edits of the split function fd that make it call
// its traced copy, tracedName, behind the semaphore's test: its
// parameters' names (sigEdits), and gate, the test at the start of the
// body, completed with the call. text is fd's source of a node with edits
// applied.
func (g *generator) callTraced(fd *ast.FuncDecl, sig *types.Signature, tracedName string, text func(ast.Node, []splice) string, recv, params []value, inlinable bool, sigEdits []splice, gate splice) []splice {
	var args []string
	for _, v := range params {
		args = append(args, v.name)
	}
	if sig.Variadic() {
		args[len(args)-1] += "..."
	}
	typeArgs := ""
	if tp := fd.Type.TypeParams; tp != nil {
		var names []string
		for _, field := range tp.List {
			for _, id := range field.Names {
				names = append(names, id.Name)
			}
		}
		typeArgs = "[" + strings.Join(names, ", ") + "]"
	}
	var call string
	switch {
	case inlinable && g.generics && !shadowsReceiverType(fd):
		// Through a helper that calls a parameter: see callHelper.
		fun := tracedName + typeArgs
		if len(recv) > 0 {
			fun = "(" + text(fd.Recv.List[0].Type, nil) + ")." + tracedName
			args = append([]string{recv[0].name}, args...)
		}
		if sig.Variadic() {
			args[len(args)-1] = strings.TrimSuffix(args[len(args)-1], "...")
		}
		call = g.callHelper(len(args), sig.Results().Len(), sig.Variadic()) + "(" + strings.Join(append([]string{fun}, args...), ", ") + ")"
	case len(recv) > 0:
		call = recv[0].name + "." + tracedName + typeArgs + "(" + strings.Join(args, ", ") + ")"
	default:
		call = tracedName + typeArgs + "(" + strings.Join(args, ", ") + ")"
	}
	if sig.Results().Len() > 0 {
		call = "return " + call
	} else {
		call += "; return"
	}
	gate.Text += call + " }; "
	return append(sigEdits, gate)
}

// shadowsReceiverType reports whether a name that fd declares (receiver,
// parameter or result) is also a name in its receiver's type, as in
// func (closure *closure) f(): in fd's body the method expression
// (*closure).f would name the receiver, not the type.
func shadowsReceiverType(fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return false
	}
	declared := map[string]bool{}
	for _, fl := range []*ast.FieldList{fd.Recv, fd.Type.Params, fd.Type.Results} {
		if fl == nil {
			continue
		}
		for _, field := range fl.List {
			for _, id := range field.Names {
				declared[id.Name] = true
			}
		}
	}
	shadowed := false
	ast.Inspect(fd.Recv.List[0].Type, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && declared[id.Name] {
			shadowed = true
		}
		return !shadowed
	})
	return shadowed
}

// callHelper returns the name of a generic function that calls its first
// argument, a function of params parameters (the last variadic) and
// results results, with the others. The untraced test of a split function
// that the compiler inlines calls its traced copy through it: the inliner
// charges a call 57 of its budget of 80, but a call of a parameter 17, and
// a call of an inlinable function that function's cost, which makes the
// test and the call cost about 30 instead of 67-79. Once the helper is
// inlined, the parameter is the traced copy, called directly.
func (g *generator) callHelper(params, results int, variadic bool) string {
	name := fmt.Sprintf("%sCall%d_%d", canonical, params, results)
	if variadic {
		name = fmt.Sprintf("%sCallV%d_%d", canonical, params, results)
	}
	if _, ok := g.calls[name]; ok {
		return g.prefix + strings.TrimPrefix(name, canonical)
	}
	var tps, ps, as, rs []string
	for i := range params {
		tps = append(tps, fmt.Sprintf("A%d", i))
		t := fmt.Sprintf("A%d", i)
		a := fmt.Sprintf("a%d", i)
		if variadic && i == params-1 {
			ps = append(ps, a+" []"+t)
			as = append(as, a+"...")
			continue
		}
		ps = append(ps, a+" "+t)
		as = append(as, a)
	}
	for i := range results {
		tps = append(tps, fmt.Sprintf("R%d", i))
		rs = append(rs, fmt.Sprintf("R%d", i))
	}
	fparams := slices.Clone(tps[:params])
	if variadic {
		fparams[params-1] = "..." + fparams[params-1]
	}
	result := strings.Join(rs, ", ")
	if results > 1 {
		result = "(" + result + ")"
	}
	body := "f(" + strings.Join(as, ", ") + ")"
	if results > 0 {
		body = "return " + body
	}
	typeParams := ""
	if len(tps) > 0 {
		typeParams = "[" + strings.Join(tps, ", ") + " interface{}]"
	}
	g.calls[name] = fmt.Sprintf("func %s%s(%s) %s { %s }\n", name, typeParams,
		strings.Join(append([]string{"f func(" + strings.Join(fparams, ", ") + ") " + result}, ps...), ", "), result, body)
	return g.prefix + strings.TrimPrefix(name, canonical)
}

// joinable returns the return statements of fd, a function with an exit
// probe, and why they cannot be turned into jumps to a single return
// without changing what the function means: empty when they can.
//
// The exit probe is a deferred call, which Go open-codes, calling it
// inline at every return, only while the function's returns times its
// defers are at most 15; past that, every return, traced or not, calls
// runtime.deferreturn. And every open-coded return repeats the test and
// the call. With one return, the exit probe costs one test on the way out
// and is open-coded in any function. Without unwind, the single return is
// where the exit probe fires.
//
// A function with defer statements of its own keeps its returns: a
// deferred call that panics would show the single return's line in the
// traceback, not the return it ran at (and one that recovers returns
// without passing the single return). So does one that declares a name of
// its results anywhere, where an assignment to the result could reach
// another variable, and one whose top level redeclares a parameter or
// result with :=.
func (g *generator) joinable(fd *ast.FuncDecl) (returns []*ast.ReturnStmt, why string) {
	ok := true
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // its returns and defers are its own
		case *ast.DeferStmt:
			ok = false
		case *ast.ReturnStmt:
			returns = append(returns, n)
		}
		return ok
	})
	if !ok {
		return nil, "it defers calls of its own"
	}
	// The body moves into a block of its own, where a short variable
	// declaration of its top level would declare a parameter or result
	// anew instead of assigning it. (At the top level, := can only assign
	// them: they are declared in the same block.)
	params := fieldNames(fd.Recv, fd.Type.Params, fd.Type.Results)
	for _, st := range fd.Body.List {
		for labeled, isLabeled := st.(*ast.LabeledStmt); isLabeled; labeled, isLabeled = st.(*ast.LabeledStmt) {
			st = labeled.Stmt
		}
		if as, isAssign := st.(*ast.AssignStmt); isAssign && as.Tok == token.DEFINE {
			for _, lhs := range as.Lhs {
				if id, isIdent := lhs.(*ast.Ident); isIdent && params[id.Name] {
					return nil, "it assigns " + id.Name + " with := at its top level"
				}
			}
		}
	}
	if results := fieldNames(fd.Type.Results); len(results) > 0 && declares(fd.Body, results) {
		return nil, "its body declares a name of its results again"
	}
	return returns, ""
}

// declares reports whether body may declare a variable or constant named
// in names, which would then hide it where it is declared. It reads the
// syntax, since function bodies are not type-checked, and errs on the side
// of keeping the returns: a function literal's type in a declaration, such
// as var f func(y int), counts as declaring y.
func declares(body *ast.BlockStmt, names map[string]bool) bool {
	found := false
	declared := func(ids ...ast.Expr) {
		for _, id := range ids {
			if id, isIdent := id.(*ast.Ident); isIdent && names[id.Name] {
				found = true
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt: // a type switch's symbolic variable too
			if n.Tok == token.DEFINE {
				declared(n.Lhs...)
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				declared(n.Key, n.Value)
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				declared(id)
			}
		case *ast.TypeSpec:
			declared(n.Name)
		case *ast.FuncType: // a function literal's parameters and results
			for _, list := range []*ast.FieldList{n.Params, n.Results} {
				if list != nil {
					for _, field := range list.List {
						for _, id := range field.Names {
							declared(id)
						}
					}
				}
			}
		}
		return !found
	})
	return found
}

// fieldNames is the set of names the lists declare, blank ones aside.
func fieldNames(lists ...*ast.FieldList) map[string]bool {
	names := map[string]bool{}
	for _, list := range lists {
		if list == nil {
			continue
		}
		for _, field := range list.List {
			for _, id := range field.Names {
				if id.Name != "_" {
					names[id.Name] = true
				}
			}
		}
	}
	return names
}

// splitMaxNodes bounds the size (syntax nodes of the body) of the
// functions instrument splits. Only a tiny body leaves the untraced
// function inlinable: the semaphore's test and the call of the traced copy
// take 67-69 of the inliner's budget of 80 (measured with -gcflags=-m=2 on
// every function of go-jsonnet and fifteen large standard packages). A
// larger split function saves only the deferred call's setup (about 0.4 ns
// a call) and costs a second compile of its body, with everything inlined
// into it: instrumenting all of go/types compiles it in 1.05x the plain
// time at 16 nodes, 1.3x at 30 and 1.35x at 60.
const splitMaxNodes = 16

// splitMaxNodes2 is splitMaxNodes for functions of two results.
const splitMaxNodes2 = 6

// splittable reports whether fd's body can be copied into a second
// function unchanged in meaning, and whether the copy can keep fd
// inlinable: with two results at most, and no call costlyCall reports.
func (g *generator) splittable(f *file, fd *ast.FuncDecl) bool {
	if !g.copyable(fd) {
		return false
	}
	// Each result past the first costs the call of the traced copy 9
	// more: with two, the test and the call take 76-79 of the budget,
	// which leaves room for no more than "return 0, io.EOF"; with three,
	// for nothing.
	maxNodes := splitMaxNodes
	switch fd.Type.Results.NumFields() {
	case 0, 1:
	case 2:
		maxNodes = splitMaxNodes2
	default:
		return false
	}
	// The size first: costlyCall may have to read an import's export data.
	nodes := 0
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if n != nil {
			nodes++
		}
		return nodes <= maxNodes
	})
	if nodes > maxNodes {
		return false
	}
	ok := true
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if call, isCall := n.(*ast.CallExpr); isCall && g.costlyCall(f, call) {
			ok = false
		}
		return ok
	})
	return ok
}

// copyable reports whether fd's body can be copied into a second function
// unchanged in meaning.
func (g *generator) copyable(fd *ast.FuncDecl) bool {
	return uncopyable(fd) == ""
}

// uncopyable says why fd's body cannot be copied into a second function
// unchanged in meaning, or returns "".
func uncopyable(fd *ast.FuncDecl) string {
	for _, d := range directives(fd) {
		// noinline keeps the untraced function out of line, where the
		// split still saves the deferred call's setup; the others name
		// one function (linkname) or say what the copy cannot honour.
		if d != "//go:noinline" && d != "//go:norace" && d != "//go:nocheckptr" {
			return "it has the directive " + strings.Fields(d)[0] + ", which a copy cannot honour"
		}
	}
	if tp := fd.Type.TypeParams; tp != nil {
		for _, field := range tp.List {
			for _, id := range field.Names {
				if id.Name == "_" {
					return "a type parameter is blank, and cannot be passed on"
				}
			}
		}
	}
	why := ""
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			// A type declared in the body would be two types, and
			// values of it from the two copies would differ.
			if n.Tok == token.TYPE {
				why = "it declares a type, which its copy would declare again as another type"
			}
		case *ast.CallExpr:
			// recover stops a panic only when the deferred function
			// calls it itself, not when the copy it calls does.
			if isIdent(n.Fun, "recover") {
				why = "it calls recover, which stops a panic only in the function deferred itself"
			}
		}
		return why == ""
	})
	return why
}

// costlyCall reports whether call may cost the inliner 57 (a call it does
// not inline) or more. Of a split function's budget, the probes leave 11
// to 13, and a call of a probed function costs 57 at least: the function
// is not inlinable, or it is split and its test and call cost 67. Splitting
// a function that calls one gives it a traced copy but keeps it out of
// line all the same, as 1,300 of the 2,577 functions split in the program
// above were. So every call is costly but those of builtins, conversions,
// and functions of the packages that are never probed (such as
// internal/byteorder's or sync/atomic's), which can cost less. The callee
// is resolved by name, without types: a miss costs a split, not meaning.
func (g *generator) costlyCall(f *file, call *ast.CallExpr) bool {
	fun := ast.Unparen(call.Fun)
	switch fun := fun.(type) {
	case *ast.ArrayType, *ast.StarExpr, *ast.FuncType, *ast.MapType, *ast.ChanType, *ast.InterfaceType, *ast.StructType:
		return false // a conversion
	case *ast.Ident:
		obj := g.pkg.Scope().Lookup(fun.Name)
		if obj == nil {
			obj = types.Universe.Lookup(fun.Name)
		}
		switch obj.(type) {
		case *types.TypeName, *types.Builtin:
			return false
		}
	case *ast.SelectorExpr:
		pkgName, isIdent := fun.X.(*ast.Ident)
		if !isIdent {
			return true
		}
		imported := g.imported(f, pkgName.Name)
		if imported == nil {
			return true // a method or a field
		}
		switch imported.Scope().Lookup(fun.Sel.Name).(type) {
		case *types.TypeName, *types.Builtin:
			return false
		}
		return !Excluded(imported.Path())
	}
	return true
}

// imported returns the package f imports as name, or nil. An import the
// type-check gave a stand-in is read now, found by the name its path
// suggests (see guessName): a package named otherwise is taken for a
// variable, whose call is costly, as a miss should be.
func (g *generator) imported(f *file, name string) *types.Package {
	for _, spec := range f.ast.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		for _, p := range g.pkg.Imports() {
			if p.Path() != path {
				continue
			}
			if spec.Name != nil && spec.Name.Name == name || spec.Name == nil && p.Name() == name {
				return g.real(p)
			}
		}
	}
	return nil
}

// directives returns the //go: directives in fd's doc comment.
func directives(fd *ast.FuncDecl) []string {
	var ds []string
	if fd.Doc != nil {
		for _, c := range fd.Doc.List {
			if strings.HasPrefix(c.Text, "//go:") {
				ds = append(ds, strings.TrimSpace(c.Text))
			}
		}
	}
	return ds
}

// tracedName is the name of fd's traced copy: Name_usdtTraced (name_usdtTraced
// for an exported method, see autoprobe.TracedName), numbered if
// the package already has something of that name or its files use it
// (a parameter of that name would capture the call).
func (g *generator) tracedName(fd *ast.FuncDecl, sig *types.Signature) string {
	for i := 0; ; i++ {
		name := autoprobe.TracedName(fd.Name.Name, sig.Recv() != nil, i)
		if g.takeTracedName(fd, sig, name) {
			return name
		}
	}
}

// takeTracedName reserves name for fd's traced copy, and reports false
// when it is taken.
func (g *generator) takeTracedName(fd *ast.FuncDecl, sig *types.Signature, name string) bool {
	var taken types.Object
	if sig.Recv() != nil {
		taken, _, _ = types.LookupFieldOrMethod(sig.Recv().Type(), true, g.pkg, name)
	} else {
		taken = g.pkg.Scope().Lookup(name)
	}
	key := name
	if sig.Recv() != nil {
		key = recvTypeName(fd.Recv.List[0].Type) + "." + name
	}
	if taken != nil || g.traced[key] || g.idents[name] {
		return false
	}
	g.traced[key] = true
	return true
}

// pass converts values to probe arguments, keeping room for the goroutine
// id in arg0 and dropping what does not fit the note. copies are
// statements that go before the probe's call, in the traced branch: a
// value passed by its address is first copied there (see copyLimit).
func (g *generator) pass(vals []value) (args []probe.Arg, exprs, copies []string, dropped []probe.Arg) {
	for i, v := range vals {
		if i >= probe.MaxArgs-1 {
			return args, exprs, copies, g.drop(vals[i:])
		}
		name := v.name
		if size, known := layout.Size(v.typ, g.sizes); boxed(v.typ) || byAddress(v.typ) && (!known || size <= copyLimit) {
			name = g.id("Copy%d", g.copies)
			g.copies++
			if boxed(v.typ) {
				// interface{} is a type literal, which no declaration
				// of the package can capture, where any could be.
				copies = append(copies, name+" := interface{}("+v.name+")")
			} else {
				copies = append(copies, name+" := "+v.name)
			}
		}
		k, e := g.convert(v.typ, name)
		args = append(args, g.arg(v, k))
		exprs = append(exprs, e)
	}
	return args, exprs, copies, nil
}

// copyLimit is the largest value a probe passes the address of a copy
// of, rather than of the variable itself. Taking a variable's address
// anywhere in a function changes how Go compiles it, traced or not: the
// variable leaves registers, and a closure captures it by reference, so
// that one the function hands on moves it to the heap (encoding/json's
// typeEncoder, "moved to heap: t"). Go captures by value, and keeps in
// registers, only variables of at most 128 bytes; larger ones are
// compiled the same way with their address taken, and are not worth
// copying on every traced call. A value whose size the generic code does
// not know is copied.
const copyLimit = 128

// drop describes values a probe has no room for.
func (g *generator) drop(vals []value) []probe.Arg {
	args := make([]probe.Arg, len(vals))
	for i, v := range vals {
		args[i] = g.arg(v, probe.Invalid)
	}
	return args
}

// exitReads is what passAt gives an exit probe's deferred call.
type exitReads struct {
	args []probe.Arg
	// ptrs are the addresses to store, in field order, and reads how to
	// read each value (readZero for a constant, which has no address).
	ptrs    []string
	reads   []read
	dropped []probe.Arg
	// typeArgs are the type parameters of the values fire boxes, in
	// order: the shape's type arguments.
	typeArgs []string
}

// passAt is pass for the exit probe's deferred call: each value is read
// through its address, held in a field of the generated usdtAutoExitN
// type. Room is kept for the goroutine id and the elapsed time in arg0 and
// arg1.
func (g *generator) passAt(vals []value) exitReads {
	var x exitReads
	if len(vals) > probe.MaxArgs-2 {
		x.dropped = g.drop(vals[probe.MaxArgs-2:])
		vals = vals[:probe.MaxArgs-2]
	}
	for _, v := range vals {
		k, r, ok := convertAt(v.typ)
		x.args = append(x.args, g.arg(v, k))
		if !ok {
			x.reads = append(x.reads, readZero)
			continue
		}
		x.reads = append(x.reads, r)
		if r == readBox {
			// Typed, so that the shape's fire method can box the value.
			x.ptrs = append(x.ptrs, "&"+v.name)
			x.typeArgs = append(x.typeArgs, types.TypeString(v.typ, nil))
			continue
		}
		x.ptrs = append(x.ptrs, g.prefix+"Pointer(&"+v.name+")")
	}
	return x
}

// fire is how the fire method of the exit probe at site passes the site
// and reads the results, and the site its deferred call holds. Where it
// can, the reads go with the site (see readShift) and shared says so: the
// method then serves every function whose results are as many words. A
// string (which a Go fire function copies) or a constant needs its read
// spelled out in the method.
func (x exitReads) fire(site int) (exprs []string, held string, shared bool) {
	shared = len(x.reads) > 0 && len(x.reads) <= maxSharedReads && site < 1<<readShift &&
		!slices.ContainsFunc(x.reads, func(r read) bool { return r == readZero || r == readString || r == readBox })
	exprs, held = []string{"x.site"}, fmt.Sprint(site)
	if shared {
		exprs[0] = fmt.Sprintf("x.site&%#x", 1<<readShift-1)
	}
	var code int
	field := 0
	for i, r := range x.reads {
		if r == readZero {
			exprs = append(exprs, "0")
			continue
		}
		field++
		p := fmt.Sprintf("x.a%d", field)
		if r == readBox {
			exprs = append(exprs, fmt.Sprintf("usdtAutoWord(unsafe.Pointer(&b%d))", field))
			continue
		}
		if !shared {
			exprs = append(exprs, r.expr(p))
			continue
		}
		shift := readShift + readBits*i
		exprs = append(exprs, fmt.Sprintf("usdtAutoRead(x.site>>%d, %s)", shift, p))
		code |= int(r) << (readBits * i)
	}
	if code != 0 {
		// In octal, one digit per result from the lowest; plain octal,
		// not 0o, which Go before 1.13 lacks.
		held = fmt.Sprintf("%d|0%o<<%d", site, code, readShift)
	}
	return exprs, held, shared
}

// boxes are the fields (from 1) of the values fire boxes: its method
// declares bN := interface{}(*x.aN) for each, which the reads pass the
// address of.
func (x exitReads) boxes() []int {
	var boxes []int
	field := 0
	for _, r := range x.reads {
		if r == readZero {
			continue
		}
		field++
		if r == readBox {
			boxes = append(boxes, field)
		}
	}
	return boxes
}
