// Package rewrite instruments the functions of one Go package that a rules
// file selects, for usdt-toolexec's compile step: each gets an entry probe
// (goroutine id, receiver, parameters) and an exit probe (goroutine id, the
// nanoseconds since the same call's entry, results). One semaphore gates
// both probes of a function: the kernel counts the tracers of either in it.
//
// It is the tool's internals, not an API for other programs: its only
// client is usdt-toolexec (internal/toolexec), and it changes with it.
//
// Probes are spliced into the source text at positions the parser reports,
// on the line of the function's opening brace, rather than printed back
// from a modified syntax tree: every original byte keeps its line, so
// panics, stack traces, DWARF line tables and -cover profiles point at the
// user's code exactly. A //line directive maps the rewritten copy back to
// the original file name.
//
// The code the probes call is generated into the package itself and
// imports nothing but unsafe: an instrumented package can be one that this
// project's runtime package depends on (strings, sync, ...), and the go
// command only lets a package import what it already imports.
package rewrite

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"go/version"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/asmgen"
	"github.com/go-usdt/usdt/internal/goidoff"
	"github.com/go-usdt/usdt/internal/inlining"
	"github.com/go-usdt/usdt/internal/srcedit"
	"github.com/go-usdt/usdt/rules"
)

// Config describes one compile of one package.
type Config struct {
	// ImportPath is the compiler's -p: the symbol prefix ("main" for a
	// command).
	ImportPath string
	// MatchPath is the path rules match, the real import path even for a
	// command; ImportPath when empty.
	MatchPath string
	// Files are the Go files as the compiler received them.
	Files     []string
	ImportCfg string
	GOARCH    string
	// GoVersion is the compiler's -lang value, if any.
	GoVersion  string
	Rules      *rules.Rules
	GoidOffset int64
	// P is where the runtime keeps a goroutine's P, which the
	// trampolines need to write to the in-process ring; nil builds
	// trampolines without it.
	P *goidoff.P
	// OutDir is the directory the rewritten and generated files are named
	// in (see Result.Sources).
	OutDir string
	// Inlined, when set, returns the compiler's inlining decisions on the
	// functions at want, compiled as written (see internal/inlining). A
	// function the plain build inlines is then split so that it stays
	// inlinable with its probes where it can, or as written, unprobed,
	// where its rule says inline: keep; without decisions every selected
	// function is probed in its own body.
	Inlined func(want []inlining.Pos) map[inlining.Pos]inlining.Decision
}

// Func is one instrumented function.
type Func struct {
	Name        string // "Func" or "Type.Method"
	Entry, Exit string // probe names, empty when the rule asked for none
	Dropped     int    // arguments beyond the note's limit, not passed
	// Traced names the function's traced copy when it was split.
	Traced string
	// Deferred says why the exit probe is a deferred call although the
	// rule has unwind: false.
	Deferred string
	// Inlined is the inliner's cost of the function as written, when the
	// compiler inlines it and its rule says inline: keep: such a function
	// has no probes (Entry and Exit are empty).
	Inlined *inlining.Decision
	// Notes says the function is left as the compiler makes it, its
	// probes notes on its own code (sites: notes); Unprobed, why such a
	// function has none.
	Notes    bool
	Unprobed string
	// Rule is where the rule that selected the function starts.
	Rule rules.Pos
	// Probed is the inliner's decision on the function as written when
	// the compiler inlines it and it is probed all the same (inline:
	// probe): it stays inlinable if it is split (Traced) and its cost
	// plus ProbedInlineCost fits the inliner's budget.
	Probed *inlining.Decision
	// Switch says the function is left exactly as written, its probes in
	// its traced copy (Traced), which nothing calls (sites: switch; see
	// switchable). NoSwitch says why a function whose rule says sites:
	// switch has no such copy, and is probed as sites: code probes it.
	Switch   bool
	NoSwitch string
}

// ProbedInlineCost is about what a split function's probes cost the
// inliner: the semaphore's test and the call of the traced copy through
// a generic helper, whose call of a parameter the inliner charges 17. A
// function the compiler inlines as written at a cost up to about 50 of
// its budget of 80 stays inlined with its probes.
const ProbedInlineCost = 30

// InlineBudget is the compiler's inlining budget.
const InlineBudget = 80

// Result is what the compile must use instead of its inputs.
type Result struct {
	// Skipped, when not empty, says why the package must be compiled as
	// it is, uninstrumented.
	Skipped string
	// Files replaces the compiler's file list.
	Files []string
	// Sources holds the contents of the files of Files that Package made,
	// by path: the compile step hands them to the compiler without
	// writing them (see toolexec's Step).
	Sources map[string][]byte
	// Asm is the Plan9 assembly of the stubs, the probe table and the
	// goroutine-id reader, to assemble and add to the package archive.
	Asm []byte
	// Ring says that Asm defines the in-process ring and its writer.
	Ring  bool
	Funcs []Func
}

// Never lists the packages whose functions are never instrumented: the
// runtime and what it is built from run where probes cannot (no stack
// growth, no write barriers, no defer).
var never = regexp.MustCompile(`^(runtime|runtime/.*|internal/runtime/.*|internal/abi|internal/bytealg|internal/cpu|internal/goarch|internal/goos|internal/goexperiment|internal/chacha8rand|internal/godebugs|internal/profilerecord|internal/race|internal/msan|internal/asan|internal/stringslite|internal/byteorder|internal/coverage/rtcov|internal/sync|internal/synctest|sync/atomic|unsafe|github\.com/go-usdt/usdt/runtime)$`)

// Excluded reports whether importPath may never be instrumented.
func Excluded(importPath string) bool { return never.MatchString(importPath) }

// directives a function may carry that rule instrumentation out: code that
// must not grow the stack, must run on the system stack, or must not
// contain write barriers cannot call a probe or defer.
var forbidden = []string{"//go:nosplit", "//go:systemstack", "//go:nowritebarrier", "//go:nowritebarrierrec", "//go:yeswritebarrierrec", "//go:uintptrescapes", "//go:cgo_unsafe_args"}

type file struct {
	path string
	src  []byte
	ast  *ast.File
}

// splice is an edit of a file's source at an offset of the original.
type splice = srcedit.Edit

// Package instruments cfg's package. It returns nil when no function is
// selected, so the compile can run unchanged.
func Package(cfg Config) (*Result, error) {
	if cfg.MatchPath == "" {
		cfg.MatchPath = cfg.ImportPath
	}
	if Excluded(cfg.MatchPath) || cfg.Rules == nil || !cfg.Rules.MatchPackage(cfg.MatchPath) {
		return nil, nil
	}
	fset := token.NewFileSet()
	var files []*file
	var selected []inlining.Pos
	asWritten := 0
	for _, path := range cfg.Files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, &file{path, src, f})
		if !probeCode(files[len(files)-1]) {
			for _, fd := range funcs(f) {
				if rule, ok := cfg.Rules.Match(cfg.MatchPath, funcName(fd)); ok {
					if rule.Notes || rule.Switch && unswitchable(fd) == "" {
						// Left as written; a switched function's copy,
						// which nothing calls, is inlined nowhere.
						asWritten++
					} else {
						selected = append(selected, namePos(fset, fd))
					}
				}
			}
		}
	}
	if len(selected) == 0 && asWritten == 0 {
		return nil, nil
	}
	// A note-only probe, or a switched function's copy, changes no code
	// of its function, whose inlining stays as it is without asking.
	var inlined map[inlining.Pos]inlining.Decision
	if cfg.Inlined != nil && len(selected) > 0 {
		inlined = cfg.Inlined(selected)
	}
	// An attribute's expression may use any import, which a stand-in
	// would not give it.
	standIns := !slices.ContainsFunc(cfg.Rules.Rules, func(r rules.Rule) bool { return len(r.Attributes) > 0 || r.Context.Expr != "" })
	res, stale, err := generate(cfg, fset, files, inlined, standIns)
	if stale && standIns && err == nil {
		// A layout met a type of an import the first check stood in for:
		// check again with every import read.
		res, _, err = generate(cfg, fset, files, inlined, false)
	}
	return res, err
}

// namePos is where the compiler's messages place fd: at its name, or a
// method at its receiver's parenthesis.
func namePos(fset *token.FileSet, fd *ast.FuncDecl) inlining.Pos {
	at := fd.Name.Pos()
	if fd.Recv != nil {
		at = fd.Recv.Opening
	}
	p := fset.Position(at)
	return inlining.Pos{File: filepath.Base(p.Filename), Line: p.Line, Col: p.Column}
}

// generate instruments the files, type-checked with standIns or not (see
// typeCheck), and reports whether a layout the probe table records was
// stale: made of a stand-in or an invalid type.
func generate(cfg Config, fset *token.FileSet, files []*file, inlined map[inlining.Pos]inlining.Decision, standIns bool) (res *Result, stale bool, err error) {
	pkg, info, real, err := typeCheck(cfg, fset, files, false, standIns)
	if err != nil {
		return nil, false, fmt.Errorf("type-checking %s for instrumentation: %w", cfg.ImportPath, err)
	}

	g := newGenerator(pkg, real, cfg.Rules.Provider, files)
	g.generics = cfg.GoVersion == "" || version.Compare(cfg.GoVersion, "go1.18") >= 0
	g.sizes = types.SizesFor("gc", cfg.GOARCH)
	res = &Result{Sources: map[string][]byte{}}
	var spliced strings.Builder
	for _, f := range files {
		if probeCode(f) {
			res.Files = append(res.Files, f.path)
			continue
		}
		var edits []splice
		for _, fd := range funcs(f.ast) {
			rule, ok := cfg.Rules.Match(cfg.MatchPath, funcName(fd))
			if !ok {
				continue
			}
			obj, _ := info.Defs[fd.Name].(*types.Func)
			if obj == nil {
				continue
			}
			if rule.Notes {
				fn := g.notes(fd, obj, rule, cfg)
				fn.Rule = rule.Pos
				res.Funcs = append(res.Funcs, fn)
				continue
			}
			noSwitch := ""
			if rule.Switch {
				if noSwitch = g.switchable(fd, obj); noSwitch == "" {
					first := len(g.probes)
					in := g.instrument(fset, f, fd, obj, rule, false, true)
					if in.err != nil {
						return nil, false, in.err
					}
					in.fn.Rule = rule.Pos
					g.plainNotes(fd, obj, cfg, g.probes[first:])
					res.Funcs = append(res.Funcs, in.fn)
					edits = append(edits, splice{At: len(f.src), Text: in.traced})
					continue
				}
			}
			d, inlinable := inlined[namePos(fset, fd)]
			inlinable = inlinable && d.Inlinable
			if inlinable && rule.KeepInlined {
				res.Funcs = append(res.Funcs, Func{Name: funcName(fd), Inlined: &d, Rule: rule.Pos, NoSwitch: noSwitch})
				g.keptInlined(fd, obj, cfg)
				continue
			}
			in := g.instrument(fset, f, fd, obj, rule, inlinable, false)
			if in.err != nil {
				return nil, false, in.err
			}
			in.fn.Rule, in.fn.NoSwitch = rule.Pos, noSwitch
			if inlinable {
				in.fn.Probed = &d
			}
			res.Funcs = append(res.Funcs, in.fn)
			edits = append(edits, in.edits...)
			if in.traced != "" {
				edits = append(edits, splice{At: len(f.src), Text: in.traced})
			}
		}
		if len(edits) == 0 {
			res.Files = append(res.Files, f.path)
			continue
		}
		for _, e := range edits {
			spliced.WriteString(e.Text)
			spliced.WriteByte('\n')
		}
		path, src, err := srcedit.Copy(cfg.OutDir, "usdt_rewritten_", f.path, f.src, edits)
		if err != nil {
			return nil, false, err
		}
		res.Files = append(res.Files, path)
		res.Sources[path] = src
	}
	if len(res.Funcs) == 0 {
		return nil, false, nil
	}
	code := slices.ContainsFunc(res.Funcs, func(fn Func) bool { return !fn.Notes && fn.Inlined == nil })
	if !code && len(g.notesOnly) == 0 {
		// Every function selected is generic and its sites notes.
		return &Result{Skipped: "no function selected has probes: they are generic, and their sites notes", Funcs: res.Funcs}, false, nil
	}
	if len(g.notesOnly) > 0 {
		src, asm, err := g.notesFiles(cfg)
		if err != nil {
			return nil, false, err
		}
		// Last in the compiler's file order, its init runs after every
		// other of the package.
		path := filepath.Join(cfg.OutDir, "usdt_note_probes.go")
		res.Sources[path] = append([]byte("//line "+path+":1:1\n"), src...)
		res.Files = append(res.Files, path)
		res.Asm = asm
	}
	if len(g.switched) > 0 {
		// Last in the compiler's file order, as the notes' file: its
		// init numbers after the package's own (init.0 stays init.0).
		path := filepath.Join(cfg.OutDir, "usdt_switch_copies.go")
		res.Sources[path] = append([]byte("//line "+path+":1:1\n"), g.copiesFile()...)
		res.Files = append(res.Files, path)
	}
	if !code {
		return res, false, nil
	}
	gen, asm, err := g.files(cfg, spliced.String())
	var shadowed *Shadowed
	if errors.As(err, &shadowed) {
		return &Result{Skipped: err.Error()}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	asm = append(asm, res.Asm...)
	// The directive names the file as if it were on disk, where the
	// compiler records a file passed through memory as /dev/fd/N.
	genPath := filepath.Join(cfg.OutDir, "usdt_auto_probes.go")
	res.Sources[genPath] = append([]byte("//line "+genPath+":1:1\n"), gen...)
	// First in the compiler's file order, the probe table is the first
	// package variable declared. Having no initializer, it is then also
	// the first initialized, before any user variable whose initializer
	// calls an instrumented function: instrumentation adds dependencies
	// only on it, so the order the spec gives the user's variables stays
	// as it was.
	res.Files = append([]string{genPath}, res.Files...)
	res.Asm = asm
	res.Ring = asmgen.Runtime{Goid: cfg.GoidOffset, P: cfg.P}.WithRing(asmgen.Arch(cfg.GOARCH))
	return res, g.staleLayouts && standIns, nil
}

// probeCode reports the files that are not instrumented whatever the rules
// say: cgo's glue (the user's code is in the *.cgo1.go files), and
// usdtgen's probe functions, which are probes already: a rule over their
// package would otherwise put probes on the probes.
func probeCode(f *file) bool {
	if strings.HasPrefix(filepath.Base(f.path), "_cgo_") {
		return true
	}
	for _, c := range f.ast.Comments {
		if c.Pos() > f.ast.Package {
			break
		}
		if strings.HasPrefix(c.Text(), "Code generated by usdtgen") {
			return true
		}
	}
	return false
}

// funcs returns the function declarations that may be instrumented at all.
func funcs(f *ast.File) []*ast.FuncDecl {
	var out []*ast.FuncDecl
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil || fd.Name.Name == "_" || fd.Recv == nil && fd.Name.Name == "init" {
			continue
		}
		if hasForbiddenDirective(fd.Doc) {
			continue
		}
		out = append(out, fd)
	}
	return out
}

func hasForbiddenDirective(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, c := range doc.List {
		for _, d := range forbidden {
			if c.Text == d || strings.HasPrefix(c.Text, d+" ") {
				return true
			}
		}
	}
	return false
}

// funcName is the name rules match: "Func" or "Type.Method".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return recvTypeName(fd.Recv.List[0].Type) + "." + fd.Name.Name
}

// goReceiver is what Go's symbol name for the method fd shows of its
// receiver that funcName does not (see probe.Probe.Receiver).
func goReceiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	var ptr, generic string
	for e := fd.Recv.List[0].Type; ; {
		switch t := e.(type) {
		case *ast.StarExpr:
			ptr, e = "*", t.X
			continue
		case *ast.ParenExpr:
			e = t.X
			continue
		case *ast.IndexExpr, *ast.IndexListExpr:
			generic = "[...]"
		}
		return ptr + generic
	}
}

func recvTypeName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}

// applySplices returns src[start:end] with the edits that fall in it,
// start and end included, applied.
func applySplices(src []byte, start, end int, edits []splice) string {
	var in []splice
	for _, e := range edits {
		if e.At >= start && e.At <= end {
			e.At -= start
			in = append(in, e)
		}
	}
	return string(srcedit.Apply(src[start:end], in))
}
