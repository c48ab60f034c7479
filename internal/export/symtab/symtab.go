// Package symtab finds the functions of the calls usdt-toolexec trace sees
// in the binary's .gopclntab (which stripped binaries keep): their Go
// symbol names, entry addresses, source files and lines, for the pprof
// profile's locations and the OpenTelemetry spans' code attributes.
//
// A function the rewriter split into itself and a traced copy (see
// autoprobe.TracedName) may be gone from the binary, inlined wherever it
// is called: it is then found by its copy, where the probes fired, which
// the copy's line directives place at the function's source.
package symtab

import (
	"debug/elf"
	"debug/gosym"
	"strings"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/funcsites"
)

// Table is a binary's functions.
type Table struct {
	table *gosym.Table // nil when the binary has none
	// copies are the table's traced copies of split functions, by the
	// first name autoprobe.TracedName gives their function's copy.
	copies map[string][]*gosym.Func
}

// New reads f's table of functions; a file without one gives a Table
// that finds nothing.
func New(f *elf.File) (*Table, error) {
	table, err := funcsites.GoTable(f)
	if err != nil || table == nil {
		return &Table{}, err
	}
	t := &Table{table: table, copies: map[string][]*gosym.Func{}}
	for i := range table.Funcs {
		f := &table.Funcs[i]
		if first, ok := autoprobe.TracedOf(f.Name); ok {
			t.copies[first] = append(t.copies[first], f)
		}
	}
	return t, nil
}

// Open is New on the file at path.
func Open(path string) (*Table, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return New(f)
}

// Qualified is the Go symbol name of the function the tracer labels
// function ("main.(*Store).Get"), of the package whose import path is
// pkg: the label's package name replaced by the import path, except in
// package main, whose symbols say main, and where pkg is not known.
func Qualified(function, pkg string) string {
	name, rest, ok := strings.Cut(function, ".")
	if ok && name != "main" && pkg != "" {
		return pkg + "." + rest
	}
	return function
}

// Lookup finds the function the tracer labels function, of the package
// pkg, by its Go symbol name, which it returns (see Qualified). A split
// function that is not there is found by its traced copy's name, as long
// as one copy has that name: of two, one is another function's.
func (t *Table) Lookup(function, pkg string) (*gosym.Func, string) {
	if t.table == nil {
		return nil, ""
	}
	name := Qualified(function, pkg)
	if f := t.table.LookupFunc(name); f != nil {
		return f, name
	}
	if copies := t.copies[copyName(function, name)]; len(copies) == 1 {
		return copies[0], name
	}
	return nil, ""
}

// Source is the file and line of fn's entry.
func (t *Table) Source(fn *gosym.Func) (file string, line int) {
	file, line, _ = t.table.PCToLine(fn.Entry)
	return file, line
}

// copyName is the first name autoprobe.TracedName gives the traced copy
// of the function labelled function, whose symbol name is name.
func copyName(function, name string) string {
	// The function's own name is after the last dot; a method's label
	// has its type's before it.
	_, rest, _ := strings.Cut(function, ".")
	i := strings.LastIndex(name, ".")
	return name[:i+1] + autoprobe.TracedName(name[i+1:], strings.Contains(rest, "."), 0)
}
