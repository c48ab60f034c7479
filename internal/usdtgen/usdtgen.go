// Package usdtgen turns a parsed DTrace provider file into Go source: typed
// probe functions, their Enabled checks, and the assembly behind them for
// every build route (Go's linker via usdt-toolexec, the C linker via cgo, and
// platforms without USDT where the probes compile to nothing).
package usdtgen

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
	"hash/fnv"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/go-usdt/usdt/asmgen"
	"github.com/go-usdt/usdt/internal/diag"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/provider"
)

// RuntimeImport is the package generated code calls.
const RuntimeImport = "github.com/go-usdt/usdt/runtime"

// Config says what to generate.
type Config struct {
	// Source is the provider file's name as written in generated comments
	// (a base name keeps output independent of the checkout's location).
	Source    string
	Providers []provider.Provider
	// Package is the Go package name of the output.
	Package string
	// ImportPath makes C symbols unique when two packages of one binary
	// declare the same probes.
	ImportPath string
}

// File is one generated file.
type File struct {
	Name string
	Data []byte
}

// Error is a generation error tied to a position in the provider file.
type Error = diag.Error

// ExportedName is the Go identifier of a probe: provider then probe name,
// split at underscores, each piece capitalised.
func ExportedName(providerName, probeName string) string {
	var b strings.Builder
	for _, part := range strings.Split(providerName+"_"+probeName, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

type genArg struct {
	Name   string // Go parameter name
	GoType string
	Kind   probe.Kind
}

type genProbe struct {
	Provider, Name string
	Ident          string
	Pos            string
	Args           []genArg
	Index          int
	CStub, CSema   string
}

// Signature is the Go parameter list, as the runtime registry shows it.
func (p genProbe) Signature() string {
	var parts []string
	for _, a := range p.Args {
		parts = append(parts, a.Name+" "+a.GoType)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (p genProbe) Params() string {
	return strings.TrimSuffix(strings.TrimPrefix(p.Signature(), "("), ")")
}

func (p genProbe) ArgNames() string {
	var names []string
	for _, a := range p.Args {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// StubParams is the Plan9 stub's Go declaration: strings arrive as pointers
// to NUL-terminated copies.
func (p genProbe) StubParams() string {
	var parts []string
	for _, a := range p.Args {
		t := a.GoType
		if a.Kind == probe.String {
			t = "*byte"
		}
		parts = append(parts, a.Name+" "+t)
	}
	return strings.Join(parts, ", ")
}

// StubArgs is the argument list a fire function passes to a Plan9 stub.
func (p genProbe) StubArgs() string {
	var parts []string
	for i, a := range p.Args {
		if a.Kind == probe.String {
			parts = append(parts, fmt.Sprintf("usdtBuf%d.Set(%s)", i, a.Name))
		} else {
			parts = append(parts, a.Name)
		}
	}
	return strings.Join(parts, ", ")
}

// CArgs is the argument list a fire function passes to a C stub.
func (p genProbe) CArgs() string {
	var parts []string
	for i, a := range p.Args {
		switch a.Kind {
		case probe.String:
			parts = append(parts, fmt.Sprintf("(*C.char)(unsafe.Pointer(usdtBuf%d.Set(%s)))", i, a.Name))
		case probe.Pointer:
			parts = append(parts, a.Name)
		case probe.Bool:
			parts = append(parts, "C._Bool("+a.Name+")")
		default:
			parts = append(parts, "C."+asmgen.CType(a.Kind)+"("+a.Name+")")
		}
	}
	return strings.Join(parts, ", ")
}

func (p genProbe) CPrototype() string {
	var types []string
	for _, a := range p.Args {
		types = append(types, asmgen.CType(a.Kind))
	}
	if len(types) == 0 {
		types = []string{"void"}
	}
	return "void " + p.CStub + "(" + strings.Join(types, ", ") + ");"
}

// Buffers names the stack buffers a fire function needs, one per string.
func (p genProbe) Buffers() []string {
	var s []string
	for i, a := range p.Args {
		if a.Kind == probe.String {
			s = append(s, fmt.Sprintf("usdtBuf%d", i))
		}
	}
	return s
}

func (p genProbe) UsesUnsafe() bool {
	for _, a := range p.Args {
		if a.Kind == probe.Pointer {
			return true
		}
	}
	return false
}

// reserved are names a parameter must not shadow inside generated bodies.
var reserved = map[string]bool{"C": true, "unsafe": true}

func paramName(name string, i int, used map[string]bool) string {
	// Generated bodies use C, unsafe, usdtrt and usdt-prefixed locals.
	if !token.IsIdentifier(name) || token.IsKeyword(name) || name == "_" || reserved[name] || strings.HasPrefix(name, "usdt") {
		name = fmt.Sprintf("arg%d", i)
	}
	for used[name] {
		name += "_"
	}
	used[name] = true
	return name
}

type genData struct {
	Source, Package, Base string
	Table                 string
	Probes                []genProbe
	Sentinel              string
	Runtime               string
	Layout                struct{ Slots, Tail int }
	UsesUnsafe            bool
	HasStrings            bool
}

func identBase(source string) string {
	return probe.Ident(strings.TrimSuffix(filepath.Base(source), filepath.Ext(source)))
}

// Generate returns the files for cfg, in a fixed order. It writes nothing.
func Generate(cfg Config) ([]File, error) {
	base := identBase(cfg.Source)
	fileBase := strings.TrimSuffix(filepath.Base(cfg.Source), filepath.Ext(cfg.Source))
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%s", cfg.ImportPath, base)
	cprefix := fmt.Sprintf("usdt_%08x_", h.Sum32())

	d := genData{
		Source:   filepath.Base(cfg.Source),
		Package:  cfg.Package,
		Base:     base,
		Table:    "usdt" + ExportedName(base, "") + "Table",
		Sentinel: probe.Sentinel,
		Runtime:  RuntimeImport,
	}
	seen := map[string]provider.Pos{}
	var stubsGo, stubsC []asmgen.Stub
	for _, prov := range cfg.Providers {
		for _, p := range prov.Probes {
			ident := ExportedName(prov.Name, p.Name)
			// "_9" or "_" leave no letter in front; C would clash with
			// the cgo file's import "C".
			if !token.IsIdentifier(ident) || !token.IsExported(ident) || ident == "C" {
				hint := "start the provider or the probe name with a letter: Go names join the provider and probe names at underscores"
				if ident == "C" {
					hint = "rename the provider or the probe: C is cgo's pseudo-package"
				}
				return nil, &Error{Pos: p.Pos, Msg: fmt.Sprintf("probe %s:%s has no usable Go name (%q)", prov.Name, p.Name, ident), Hint: hint}
			}
			// Every probe also has an ...Enabled function, so x_enabled
			// collides with x as surely as x__y does with x_y.
			for _, name := range []string{ident, ident + "Enabled"} {
				if first, dup := seen[name]; dup {
					return nil, &Error{Pos: p.Pos, Msg: fmt.Sprintf("probe %s:%s needs the Go function %s, already generated for the probe at %d:%d", prov.Name, p.Name, name, first.Line, first.Col),
						Hint: "rename one of the probes: Go names join the provider and probe names at underscores, and every probe X also gets XEnabled"}
				}
			}
			seen[ident], seen[ident+"Enabled"] = p.Pos, p.Pos
			gp := genProbe{
				Provider: prov.Name, Name: p.Name, Ident: ident, Index: len(d.Probes),
				Pos:   fmt.Sprintf("%s:%d", d.Source, p.Pos.Line),
				CStub: cprefix + prov.Name + "_" + p.Name + "_stub",
				CSema: cprefix + prov.Name + "_" + p.Name + "_sema",
			}
			used := map[string]bool{}
			for i, a := range p.Args {
				gp.Args = append(gp.Args, genArg{Name: paramName(a.Name, i, used), GoType: a.Kind.GoType(), Kind: a.Kind})
			}
			if gp.UsesUnsafe() {
				d.UsesUnsafe = true
			}
			if len(gp.Buffers()) > 0 {
				d.HasStrings = true
			}
			d.Probes = append(d.Probes, gp)
			stubsGo = append(stubsGo, asmgen.Stub{Probe: p.Probe, Symbol: "usdtStub" + ident})
			stubsC = append(stubsC, asmgen.Stub{Probe: p.Probe, Symbol: gp.CStub, Semaphore: gp.CSema})
		}
	}
	if len(d.Probes) == 0 {
		return nil, fmt.Errorf("%s: no probes to generate", cfg.Source)
	}

	notice := fmt.Sprintf("// Code generated by usdtgen from %s. DO NOT EDIT.\n\n", d.Source)
	var files []File
	var layout struct{ Slots, Tail int }
	for _, arch := range asmgen.Arches {
		src, l, err := asmgen.Plan9(arch, notice+"//go:build linux && !cgo\n", "", d.Table, stubsGo)
		if err != nil {
			return nil, err
		}
		layout.Slots, layout.Tail = l.SemaphoreSlots, l.TailWords()
		files = append(files, File{fmt.Sprintf("%s_usdt_%s.s", fileBase, arch), src})
	}
	for _, arch := range asmgen.Arches {
		src, err := asmgen.GNU(arch, notice+"//go:build linux && cgo\n", stubsC)
		if err != nil {
			return nil, err
		}
		files = append(files, File{fmt.Sprintf("%s_usdt_cgo_%s.S", fileBase, arch), src})
	}
	d.Layout = layout
	for _, t := range []struct{ suffix, tmpl string }{
		{probe.NoCgoSuffix, noCgoTemplate},
		{"_usdt_cgo.go", cgoTemplate},
		{"_usdt_other.go", otherTemplate},
	} {
		src, err := render(t.tmpl, d)
		if err != nil {
			return nil, err
		}
		files = append(files, File{fileBase + t.suffix, src})
	}
	return files, nil
}

func render(text string, d genData) ([]byte, error) {
	t := template.Must(template.New("").Funcs(template.FuncMap{"half": func(i int) int { return i / 2 }}).Parse(text))
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return nil, err
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("usdtgen: generated invalid Go (a bug): %v\n%s", err, b.Bytes())
	}
	return out, nil
}
