// Package provider parses DTrace provider definition files (provider.d), the
// format in which a program declares its USDT probes, into probe.Probe values
// that the code generator and the note writer consume.
//
// The accepted language is the subset of DTrace's D that such files use in
// practice:
//
//	provider NAME { probe NAME(TYPE [NAME], ...); ... };
//
// together with C comments, "typedef TYPE NAME;" and "#define NAME TYPE"
// aliases (and #undef). Other preprocessor directives (#pragma, #include,
// #if, ...) are ignored: nothing is included and no conditional is
// evaluated, which is all real provider files need. The translated form
// "probe p(native types) : (translated types)" is accepted and only the
// native list counts, because that is what the program passes.
//
// Names are kept exactly as written. Unlike dtrace, which shows "__" in a
// probe name as "-", this tool puts the name in the note unchanged, so a
// name must already be what tools will list.
//
// Every C type an argument may have is mapped onto a probe.Kind; a type that
// has no sensible machine representation in a stapsdt note (a struct by
// value, a float, an array) is an error rather than a guess.
package provider

import (
	"github.com/go-usdt/usdt/internal/diag"
	"github.com/go-usdt/usdt/internal/probe"
)

// Provider is one provider block of a provider file.
type Provider struct {
	Name string
	// Pos is where the provider's name is written.
	Pos    Pos
	Probes []Probe
}

// Probe is one probe declaration. The embedded probe.Probe is what the rest
// of the tool chain needs; the other fields exist for diagnostics and
// generated documentation.
type Probe struct {
	probe.Probe
	// Pos is where the probe's name is written.
	Pos Pos
	// ArgTypes holds each argument's C type as written (aliases are not
	// expanded), with white space normalised: "const char *", "char **",
	// "unsigned long long", "Oid".
	ArgTypes []string
}

// Pos is a position in a provider file; Col counts bytes, as Go's own
// tools do, so that editors agree on it. Error is one problem found in a
// provider file; ErrorList is every problem Parse found, sorted by position.
type (
	Pos       = diag.Pos
	Error     = diag.Error
	ErrorList = diag.ErrorList
)

// Parse parses the provider file src, whose name filename is used in
// positions only. It returns every provider the file declares, in order, or
// nil and an ErrorList: a file with any error yields no providers at all, so
// that no caller can generate code from half a file.
func Parse(filename string, src []byte) ([]Provider, error) {
	lx := newLexer(filename, src)
	toks := lx.run()
	p := newParser(filename, toks, lx)
	provs := p.parseFile()
	if errs := p.errorList(); errs != nil {
		return nil, errs
	}
	return provs, nil
}
