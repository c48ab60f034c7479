package rewrite

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/types"
	"strings"

	"github.com/go-usdt/usdt/asmgen"
	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/regabi"
	"github.com/go-usdt/usdt/rules"
)

// notes gives fd, which its rule leaves as the compiler makes it (sites:
// notes), note-only probes: their notes will point into fd's own code
// (see internal/funcsites), so each passes what is where Go's register
// ABI puts it there: the goroutine id through g's register, and each
// value that one integer register holds. The exit probe's elapsed time
// is the constant 0, which keeps its results at the positions an exit
// probe spliced as code gives them.
func (g *generator) notes(fd *ast.FuncDecl, obj *types.Func, rule *rules.Rule, cfg Config) Func {
	sig := obj.Type().(*types.Signature)
	fn := Func{Name: funcName(fd), Notes: true}
	if sig.TypeParams().Len() > 0 || sig.RecvTypeParams().Len() > 0 {
		fn.Unprobed = "it is generic: its instantiations share code by shape, under other names"
		return fn
	}
	goid, err := goidSpec(cfg.GOARCH, cfg.GoidOffset)
	if err != nil {
		fn.Unprobed = err.Error()
		return fn
	}
	values := func(vars ...*types.Var) []value {
		vals := make([]value, len(vars))
		for i, v := range vars {
			vals[i] = value{v.Name(), v.Name(), v.Type()}
		}
		return vals
	}
	var params []*types.Var
	if sig.Recv() != nil {
		params = append(params, sig.Recv())
	}
	params = append(params, tupleVars(sig.Params())...)
	symbol := linkerSymbol(cfg.ImportPath, fd)
	add := func(kind string, vals []value, lead []probe.Arg, specs []string) string {
		name := autoprobe.Name(kind, g.pkg.Name(), fn.Name)
		args, dropped := g.inRegisters(cfg.GOARCH, vals, len(lead), &specs)
		fn.Dropped += len(dropped)
		g.notesOnly = append(g.notesOnly, probe.Probe{Provider: g.provider, Name: name,
			Args: append(lead, args...), Dropped: dropped, Spec: strings.Join(specs, " "),
			Receiver: goReceiver(fd), Func: symbol})
		return name
	}
	if rule.Entry {
		var vals []value
		if rule.Args {
			vals = values(params...)
		}
		fn.Entry = add("entry", vals, []probe.Arg{goidArg}, []string{goid})
	}
	if rule.Exit {
		var vals []value
		if rule.Args {
			vals = values(tupleVars(sig.Results())...)
		}
		fn.Exit = add("exit", vals, []probe.Arg{goidArg, elapsedArg}, []string{goid, zeroSpec[cfg.GOARCH]})
	}
	return fn
}

// keptInlined records that fd, which the compiler inlines, stays as
// written, without probes (inline: keep): the link step places no note
// for such a record, and usdt-toolexec list shows the function as not
// probed.
func (g *generator) keptInlined(fd *ast.FuncDecl, obj *types.Func, cfg Config) {
	sig := obj.Type().(*types.Signature)
	symbol := linkerSymbol(cfg.ImportPath, fd)
	if sig.TypeParams().Len() > 0 || sig.RecvTypeParams().Len() > 0 {
		symbol += "[...]"
	}
	g.notesOnly = append(g.notesOnly, probe.Probe{Provider: g.provider, Name: autoprobe.Name(autoprobe.KeptInlined, g.pkg.Name(), funcName(fd)),
		Receiver: goReceiver(fd), Func: symbol})
}

// inRegisters passes the values that one integer register holds, after
// lead arguments, appending their specs; the others, and those past the
// note's room, it drops.
func (g *generator) inRegisters(arch string, vals []value, lead int, specs *[]string) (args, dropped []probe.Arg) {
	ts := make([]types.Type, len(vals))
	for i, v := range vals {
		ts[i] = v.typ
	}
	for i, loc := range regabi.Assign(arch, ts) {
		k := wordKind(vals[i].typ)
		if len(loc.Ints) != 1 || k == probe.Invalid || lead+len(args) >= probe.MaxArgs {
			dropped = append(dropped, g.arg(vals[i], probe.Invalid))
			continue
		}
		args = append(args, g.arg(vals[i], k))
		*specs = append(*specs, argSpec(k, loc.Ints[0]))
	}
	return args, dropped
}

// wordKind is the kind of a value of type t that one integer register
// holds, or Invalid.
func wordKind(t types.Type) probe.Kind {
	switch u := t.Underlying().(type) {
	case *types.Basic:
		if u.Info()&(types.IsFloat|types.IsComplex|types.IsString) != 0 {
			return probe.Invalid
		}
		return basic[u.Kind()]
	case *types.Pointer, *types.Map, *types.Chan, *types.Signature:
		return probe.Pointer
	}
	return probe.Invalid
}

// zero is the constant 0 as GCC writes a constant operand, and zeroSpec
// an 8-byte argument of that value.
var (
	zero     = map[string]string{"amd64": "$0", "arm64": "0"}
	zeroSpec = map[string]string{"amd64": "8@$0", "arm64": "8@0"}
)

// argSpec is a note's spec of a value of kind k at loc: a register, or
// a constant (see zero).
func argSpec(k probe.Kind, loc string) string {
	sign := ""
	if k.Signed() {
		sign = "-"
	}
	return fmt.Sprintf("%s%d@%s", sign, k.Size(), loc)
}

// goidSpec is the goroutine id's spec: g's register, which Go's
// register ABI keeps in every function, and the id's offset in g.
func goidSpec(arch string, offset int64) (string, error) {
	switch arch {
	case "amd64":
		return fmt.Sprintf("-8@%d(%%r14)", offset), nil
	case "arm64":
		return fmt.Sprintf("-8@[x28, %d]", offset), nil
	}
	return "", fmt.Errorf("sites: notes is not supported on GOARCH=%s (amd64 and arm64 are)", arch)
}

func tupleVars(t *types.Tuple) []*types.Var {
	vars := make([]*types.Var, t.Len())
	for i := range vars {
		vars[i] = t.At(i)
	}
	return vars
}

// linkerSymbol is the linker's name of fd, of the package importPath:
// "example.com/p.F", "example.com/p.T.M", "example.com/p.(*T).M".
func linkerSymbol(importPath string, fd *ast.FuncDecl) string {
	return linkerPrefix(importPath) + "." + linkerName(fd)
}

// linkerName is fd's name in its package's symbols: "F", "T.M", "(*T).M".
func linkerName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if p, ok := typ.(*ast.ParenExpr); ok {
		typ = p.X
	}
	if star, ok := typ.(*ast.StarExpr); ok {
		return "(*" + recvTypeName(star.X) + ")." + fd.Name.Name
	}
	return recvTypeName(typ) + "." + fd.Name.Name
}

// linkerPrefix is how the compiler writes importPath in symbol names:
// control characters, spaces, '%', '"' and bytes outside ASCII escaped
// as %xx, and so are the dots of the last element.
func linkerPrefix(importPath string) string {
	last := strings.LastIndexByte(importPath, '/')
	var b strings.Builder
	for i, c := range []byte(importPath) {
		if c <= ' ' || c == '%' || c == '"' || c >= 0x7f || c == '.' && i > last {
			fmt.Fprintf(&b, "%%%02x", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// notesFiles returns the Go file and the assembly that carry the table
// of the package's note-only probes into the executable. The table is
// data nothing reads, which the linker would leave out: the package's
// init calls a function of the assembly that refers to it, once.
func (g *generator) notesFiles(cfg Config) (goSrc, asm []byte, err error) {
	keep := g.id("NotesKeep")
	var a bytes.Buffer
	ns := symbols(cfg.ImportPath, nil).Table
	if err := asmgen.Plan9Notes(&a, asmgen.Arch(cfg.GOARCH), cfg.MatchPath, ns+"_notes", ns+"_notes_keep", g.notesOnly); err != nil {
		return nil, nil, err
	}
	src := fmt.Sprintf(notice+`package %s

import _ "unsafe" // for go:linkname

// %[2]s refers to the table of the package's note-only probes (sites:
// notes), so that the linker keeps it.
//
//go:linkname %[2]s %[3]s
func %[2]s()

func init() { %[2]s() }
`, g.pkg.Name(), keep, ns+"_notes_keep")
	return []byte(src), a.Bytes(), nil
}
