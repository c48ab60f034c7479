// Package pprof makes a pprof profile of the calls usdt-toolexec trace
// sees: per chain of traced calls on a goroutine (a sample's stack), the
// number of calls, their own wall time (less that of the traced calls they
// made; the default sample type, so that a flame graph's frames are as
// wide as their calls' elapsed time) and their inclusive wall time.
//
// Its locations carry each function's entry address, source file and
// line, read from the binary's .gopclntab (see symtab), so that go tool
// pprof shows the source with the binary at hand.
package pprof

import (
	"debug/elf"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/go-usdt/usdt/internal/calltree"
	"github.com/go-usdt/usdt/internal/export/symtab"
	"github.com/go-usdt/usdt/internal/trace"
)

// Profile gathers calls into samples.
type Profile struct {
	tree        calltree.Tree
	binary      string
	mapping     *profile.Mapping
	table       *symtab.Table
	samples     map[string]*profile.Sample
	order       []string // the samples' keys, first seen first
	locations   map[string]*profile.Location
	ordered     []*profile.Location // in the order of their ids
	first, last time.Time
}

// New starts a profile of the calls of binary's functions. It reads the
// binary now: a traced process's /proc/PID/exe goes when it exits.
func New(binary string) (*Profile, error) {
	if real, err := filepath.EvalSymlinks(binary); err == nil {
		binary = real
	}
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &Profile{
		binary:    binary,
		mapping:   &profile.Mapping{ID: 1, File: binary, HasFunctions: true, HasFilenames: true, HasLineNumbers: true},
		samples:   map[string]*profile.Sample{},
		locations: map[string]*profile.Location{},
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_LOAD && prog.Flags&elf.PF_X != 0 {
			p.mapping.Start, p.mapping.Limit, p.mapping.Offset = prog.Vaddr, prog.Vaddr+prog.Memsz, prog.Off
			break
		}
	}
	if p.table, err = symtab.New(f); err != nil {
		return nil, fmt.Errorf("%s: %w", binary, err)
	}
	p.tree.End = p.end
	return p, nil
}

// Event takes one event of the tracer.
func (p *Profile) Event(ev *trace.Event) { p.tree.Add(ev) }

func (p *Profile) end(c *calltree.Call) {
	if p.first.IsZero() || c.Start.Before(p.first) {
		p.first = c.Start
	}
	if c.End.After(p.last) {
		p.last = c.End
	}
	var key strings.Builder
	var locs []*profile.Location
	for a := c; a != nil; a = a.Parent {
		key.WriteString(a.Function + "\x00")
		locs = append(locs, p.location(a))
	}
	s := p.samples[key.String()]
	if s == nil {
		s = &profile.Sample{Location: locs, Value: make([]int64, 3)}
		p.samples[key.String()] = s
		p.order = append(p.order, key.String())
	}
	s.Value[0]++
	s.Value[1] += int64(c.Self())
	s.Value[2] += int64(c.Elapsed())
}

// location is the call's function's, made the first time.
func (p *Profile) location(c *calltree.Call) *profile.Location {
	if l := p.locations[c.Function]; l != nil {
		return l
	}
	fn := &profile.Function{ID: uint64(len(p.locations) + 1), Name: c.Function, SystemName: c.Function}
	l := &profile.Location{ID: fn.ID, Mapping: p.mapping, Line: []profile.Line{{Function: fn}}}
	if sym, name := p.table.Lookup(c.Function, c.Package); sym != nil {
		file, line := p.table.Source(sym)
		fn.Name, fn.SystemName, fn.Filename, fn.StartLine = name, sym.Name, file, int64(line)
		l.Address, l.Line[0].Line = sym.Entry, int64(line)
	}
	p.locations[c.Function] = l
	p.ordered = append(p.ordered, l)
	return l
}

// Write writes the profile, gzipped as pprof reads it.
func (p *Profile) Write(w io.Writer) error {
	prof := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "calls", Unit: "count"},
			{Type: "wall", Unit: "nanoseconds"},
			{Type: "inclusive", Unit: "nanoseconds"},
		},
		DefaultSampleType: "wall",
		PeriodType:        &profile.ValueType{Type: "wall", Unit: "nanoseconds"},
		Period:            1,
		Mapping:           []*profile.Mapping{p.mapping},
		Comments:          []string{"usdt-toolexec trace -pprof of " + p.binary},
	}
	if n, gs := p.tree.Lost(); n > 0 {
		prof.Comments = append(prof.Comments, fmt.Sprintf("%d calls on %d goroutines lost their exit event: their time is what the calls they made took", n, gs))
	}
	if n, gs := p.tree.Unwound(); n > 0 {
		prof.Comments = append(prof.Comments, fmt.Sprintf("%d calls on %d goroutines did not return, with none of their events lost: a panic unwound them; their time is what the calls they made took", n, gs))
	}
	if n, gs := p.tree.Uncertain(); n > 0 {
		prof.Comments = append(prof.Comments, fmt.Sprintf("%d calls on %d goroutines began after events of theirs were lost: their callers in the stacks may be calls that had returned", n, gs))
	}
	if !p.first.IsZero() {
		prof.TimeNanos, prof.DurationNanos = p.first.UnixNano(), p.last.Sub(p.first).Nanoseconds()
	}
	for _, k := range p.order {
		prof.Sample = append(prof.Sample, p.samples[k])
	}
	for _, l := range p.ordered {
		prof.Location = append(prof.Location, l)
		prof.Function = append(prof.Function, l.Line[0].Function)
	}
	if err := prof.CheckValid(); err != nil {
		return fmt.Errorf("pprof profile: %w", err)
	}
	return prof.Write(w)
}
