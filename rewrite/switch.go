package rewrite

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/regabi"
)

// A function whose rule says sites: switch is left exactly as written,
// so that the compiler makes of it what the plain build makes, inlining
// included, and gets beside it the traced copy that a split function
// calls while traced (see instrument), with the probes sites: code
// gives: the copy's signature and receiver are the function's (only
// the names of blank and unnamed parameters and results differ), so
// that Go's register ABI passes the arguments to either alike. Nothing
// calls the copy: a switch at run time (internal/textpatch) sends the
// function's calls into its copy, and until then the copy's probes never
// fire, whoever traces. So that the linker keeps the copies, which no
// code reaches, a generated file (copiesFile) holds them in a variable
// that its init stores the address of.
//
// The switch finds the pairs by the linker's symbol names alone, as
// .gopclntab keeps them in stripped executables too: the function
// pkg.F, pkg.T.M or pkg.(*T).M, and its copy, in the same package and on
// the same receiver, named by autoprobe.SwitchName: pkg.usdtSwitched_F,
// pkg.T.usdtSwitched_M, pkg.(*T).usdtSwitched_M; a function's closures
// are pkg.F.func1 and its copy's pkg.usdtSwitched_F.func1. The name
// keeps the function's as written, so no two functions' copies share
// one (split functions' copies, whose names lower an exported method's
// first letter, give First and first the same), and where the package
// already uses it the function is probed as sites: code probes it
// instead (see switchable): a name never pairs a function with another
// function's copy.

// unswitchable says why fd, whose rule says sites: switch, gets no traced
// copy, as far as its syntax tells, or returns "".
func unswitchable(fd *ast.FuncDecl) string {
	if fd.Type.TypeParams != nil || genericReceiver(fd) {
		return "it is generic: its instantiations share code by shape, under other names"
	}
	return uncopyable(fd)
}

// genericReceiver reports whether fd is a method of a generic type.
func genericReceiver(fd *ast.FuncDecl) bool {
	return fd.Recv != nil && len(fd.Recv.List) > 0 && strings.HasSuffix(goReceiver(fd), "[...]")
}

// switchable says why fd, whose rule says sites: switch, gets no traced
// copy, or returns "" and reserves the copy's name.
func (g *generator) switchable(fd *ast.FuncDecl, obj *types.Func) string {
	if why := unswitchable(fd); why != "" {
		return why
	}
	sig := obj.Type().(*types.Signature)
	name := autoprobe.SwitchName(fd.Name.Name)
	if !g.takeTracedName(fd, sig, name) {
		return fmt.Sprintf("the package already uses the name of its copy, %s", name)
	}
	copy := name
	if fd.Recv != nil {
		typ := recvTypeName(fd.Recv.List[0].Type)
		if strings.HasPrefix(goReceiver(fd), "*") {
			typ = "(*" + typ + ")"
		}
		copy = typ + "." + name
	}
	g.switched = append(g.switched, copy)
	return ""
}

// copiesFile returns the Go file that keeps the switched functions'
// copies in the executable: a variable holding each copy, a function
// value or a method expression, which the linker keeps, with what it
// refers to, only while reachable code refers to it. The package's init
// stores its address, once.
func (g *generator) copiesFile() []byte {
	copies, kept := g.id("Copies"), g.id("CopiesKept")
	return fmt.Appendf(nil, notice+`package %s

// %[2]s holds the traced copies of the functions
// that sites: switch leaves as written: nothing calls them until a
// switch at run time jumps into one, and this variable, whose address
// init stores, keeps them in the executable.
var %[2]s = [...]interface{}{
	%[4]s,
}

var %[3]s *[%[5]d]interface{}

func init() { %[3]s = &%[2]s }
`, g.pkg.Name(), copies, kept, strings.Join(g.switched, ",\n\t"), len(g.switched))
}

// plainNotes gives fd as compiled, which its rule leaves for a switch
// (sites: switch), notes of copy, the probes of its traced copy: the
// same names and arguments, placed on fd's own instructions as sites:
// notes places them (see notes). Until a switch sends fd's calls to the
// copy, a consumer attached by the notes fires there, through a trap;
// once switched, at the copy's sites; so each call fires each probe
// once, either way. Each argument keeps its position in the copy's
// probe, so that arg2 means the same value at every site: one that
// sits in a single integer register at fd's entry (its exit, for a
// result) is read from there, and the rest (a string or a slice, which
// take more than one, a struct, a float, an attribute the copy
// computes) pass the constant 0. Where Go's register ABI is unknown
// (no GOARCH but amd64 and arm64), fd gets none.
func (g *generator) plainNotes(fd *ast.FuncDecl, obj *types.Func, cfg Config, copy []probe.Probe) {
	goid, err := goidSpec(cfg.GOARCH, cfg.GoidOffset)
	if err != nil {
		return
	}
	sig := obj.Type().(*types.Signature)
	var params []types.Type
	if sig.Recv() != nil {
		params = append(params, sig.Recv().Type())
	}
	for _, v := range tupleVars(sig.Params()) {
		params = append(params, v.Type())
	}
	var results []types.Type
	for _, v := range tupleVars(sig.Results()) {
		results = append(results, v.Type())
	}
	symbol := linkerSymbol(cfg.ImportPath, fd)
	for _, p := range copy {
		kind, _, _, ok := autoprobe.Split(p.Name)
		if !ok {
			continue
		}
		vals, lead := params, []string{goid}
		if kind == "exit" {
			vals, lead = results, []string{goid, zeroSpec[cfg.GOARCH]}
		}
		locs := regabi.Assign(cfg.GOARCH, vals)
		specs := lead
		for i, a := range p.Args[len(lead):] {
			if i < len(vals) && len(locs[i].Ints) == 1 && wordKind(vals[i]) == a.Kind {
				specs = append(specs, argSpec(a.Kind, locs[i].Ints[0]))
				continue
			}
			specs = append(specs, argSpec(a.Kind, zero[cfg.GOARCH]))
		}
		g.notesOnly = append(g.notesOnly, probe.Probe{Provider: p.Provider, Name: p.Name,
			Args: p.Args, Dropped: p.Dropped, Spec: strings.Join(specs, " "),
			Receiver: p.Receiver, Func: symbol})
	}
}
