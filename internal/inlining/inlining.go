// Package inlining asks the Go compiler which functions of a package it
// inlines when they are compiled as written.
//
// A probe in a function costs the inliner a call (57 of its budget of 80),
// so probing a function that the plain build inlines takes the inlining
// away, and with it the call-free hot path. Which functions those are
// only the compiler knows exactly: its cost model runs over its own IR,
// after implicit conversions, constant folding and dead code, and charges
// a call of another package's function that function's cost from the
// export data. So the wrapper asks it: it compiles the package's own,
// unrewritten files once more with -m=2 and reads the decision it prints
// for each function ("can inline F with cost N", "cannot inline F:
// why"). The compiler makes every decision before escape analysis and
// code generation, which are most of a compile (about 70 % of go/types'
// and net/http's), so the run is stopped as soon as every function asked
// about has its answer.
//
// The decisions are those of this compile: the same flags (-l, PGO
// profiles, -gcflags) and the same export data of the imports. An import
// whose functions were probed kept those that it inlines plain, so a
// call of one costs here what it costs in a plain build.
package inlining

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Pos is where a function's name stands: the base name of its file (or
// of the file a //line directive names) and its line and column, which is
// how the compiler's messages name a function.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Decision is what the compiler decided for one function.
type Decision struct {
	// Name is the function's, as the compiler prints it: "f", "(*T).m",
	// "f.func1" for a function literal.
	Name      string
	Inlinable bool
	// Cost is the inliner's cost of the body, when the compiler gave it.
	Cost int
	// Reason says why a function is not inlinable.
	Reason string
}

// Ask runs the compiler at tool with args, the arguments of a compile of
// the package as written, and returns its decisions for the functions at
// want, and those on any other function it decided on first. A function
// it made no decision on (a generic one it instantiated nowhere, say) is
// missing from the result. Outputs go to a temporary
// directory: the compile's own outputs are left alone.
func Ask(tool string, args []string, want []Pos) (map[Pos]Decision, error) {
	got := map[Pos]Decision{}
	if len(want) == 0 {
		return got, nil
	}
	tmp, err := os.MkdirTemp("", "usdt-inlining-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(tool, Args(args, tmp)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pending := map[Pos]bool{}
	for _, p := range want {
		pending[p] = true
	}
	stopped := false
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<26) // "can inline" prints the whole body
	for sc.Scan() {
		p, d, ok := Parse(sc.Text())
		if !ok {
			if escapes(sc.Text()) {
				// Escape analysis runs after every decision was made: a
				// function asked about that has none will get none.
				cmd.Process.Kill()
				stopped = true
				break
			}
			continue
		}
		// A generic function gets a decision per instantiation: it is
		// inlinable where any of them is.
		if old, seen := got[p]; !seen || !old.Inlinable {
			got[p] = d
		}
		if !pending[p] {
			continue
		}
		delete(pending, p)
		if len(pending) == 0 {
			// What is left of the compile is of no use here.
			cmd.Process.Kill()
			stopped = true
			break
		}
	}
	io.Copy(io.Discard, out)
	err = cmd.Wait()
	if !stopped && err != nil {
		return nil, fmt.Errorf("asking the compiler what it inlines: %v\n%s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return got, nil
}

// Args turns a compile's arguments into the asking run's: diagnostics at
// -m=2, and every file the compile writes (the archive, the linker's
// object, the assembly header) into dir.
func Args(args []string, dir string) []string {
	out := []string{"-m=2"}
	outputs := map[string]string{"-o": "pkg.a", "-linkobj": "link.a", "-asmhdr": "go_asm.h"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if name, ok := outputs[a]; ok && i+1 < len(args) {
			out = append(out, a, filepath.Join(dir, name))
			i++
			continue
		}
		if flag, _, ok := strings.Cut(a, "="); ok && outputs[flag] != "" {
			out = append(out, flag+"="+filepath.Join(dir, outputs[flag]))
			continue
		}
		out = append(out, a)
	}
	return out
}

// Parse reads one line of the compiler's -m=2 output: a decision on a
// function, or ok false.
//
//	/src/p/a.go:7:6: can inline gated with cost 74 as: func(int) int { ... }
//	/src/p/a.go:9:6: cannot inline big: function too complex: cost 91 exceeds budget 80
func Parse(line string) (p Pos, d Decision, ok bool) {
	loc, rest, found := cutPos(line)
	if !found {
		return Pos{}, Decision{}, false
	}
	switch {
	case strings.HasPrefix(rest, "can inline "):
		d.Inlinable = true
		var after string
		d.Name, after, _ = strings.Cut(strings.TrimPrefix(rest, "can inline "), " with cost ")
		n, _, _ := strings.Cut(after, " ")
		d.Cost, _ = strconv.Atoi(n)
	case strings.HasPrefix(rest, "cannot inline "):
		// The function's name holds no ": ", the reason may.
		d.Name, d.Reason, _ = strings.Cut(strings.TrimPrefix(rest, "cannot inline "), ": ")
		if strings.Contains(d.Name, " into ") || d.Reason == "" {
			return Pos{}, Decision{}, false // a call site's, not a function's
		}
		if _, after, ok := strings.Cut(d.Reason, "cost "); ok {
			n, _, _ := strings.Cut(after, " ")
			d.Cost, _ = strconv.Atoi(n)
		}
	default:
		return Pos{}, Decision{}, false
	}
	return loc, d, true
}

// escapes reports whether line is escape analysis's.
func escapes(line string) bool {
	_, rest, ok := cutPos(line)
	if !ok {
		return false
	}
	for _, s := range []string{"does not escape", "escapes to heap", "moved to heap: ", "leaking param", "parameter "} {
		if strings.Contains(rest, s) {
			return true
		}
	}
	return false
}

// cutPos splits "path:line:col: rest".
func cutPos(line string) (Pos, string, bool) {
	head, rest, ok := strings.Cut(line, ": ")
	if !ok {
		return Pos{}, "", false
	}
	i := strings.LastIndexByte(head, ':')
	if i < 0 {
		return Pos{}, "", false
	}
	col, err := strconv.Atoi(head[i+1:])
	if err != nil {
		return Pos{}, "", false
	}
	head = head[:i]
	j := strings.LastIndexByte(head, ':')
	if j < 0 {
		return Pos{}, "", false
	}
	ln, err := strconv.Atoi(head[j+1:])
	if err != nil {
		return Pos{}, "", false
	}
	return Pos{File: filepath.Base(head[:j]), Line: ln, Col: col}, rest, true
}

// Off reports whether a compile with args inlines nothing (-l), so that
// there is nothing to ask: the compiler then decides on no function, and
// Ask would wait for the whole compile.
func Off(args []string) bool {
	for _, a := range args {
		if a == "-l" || a == "-l=1" {
			return true
		}
	}
	return false
}

// Build is what the compiler said of a whole build's inlining: every
// function's decision, and how many calls of each callee it inlined on
// each line. Both are keyed by line, not by column: the rewriter splices
// code into lines, which moves columns but never lines.
type Build struct {
	Funcs map[Line]Decision
	Calls map[Line]int
}

// Line names a function, or the callee of calls, on a line of a package.
type Line struct {
	Pkg, File string
	Line      int
	Name      string
}

// Read reads the output of go build -gcflags=-m=2 (the go command's
// "# package" lines name the package of the messages after them).
func Read(r io.Reader) (Build, error) {
	b := Build{Funcs: map[Line]Decision{}, Calls: map[Line]int{}}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "# "); ok {
			pkg = p
			continue
		}
		if p, d, ok := Parse(line); ok {
			b.Funcs[Line{pkg, p.File, p.Line, d.Name}] = d
			continue
		}
		if p, rest, ok := cutPos(line); ok {
			if callee, ok := strings.CutPrefix(rest, "inlining call to "); ok {
				callee, _, _ = strings.Cut(callee, " with score ")
				b.Calls[Line{pkg, p.File, p.Line, callee}]++
			}
		}
	}
	return b, sc.Err()
}

// Lost returns what plain inlines and probed does not, each a line:
// a function no longer inlinable, with the reason probed gives, or a
// call site where the callee is no longer inlined.
func Lost(plain, probed Build) []string {
	var lost []string
	for l, d := range plain.Funcs {
		if !d.Inlinable {
			continue
		}
		if p, ok := probed.Funcs[l]; !ok || !p.Inlinable {
			why := "no decision in the probed build"
			if ok {
				why = p.Reason
			}
			lost = append(lost, fmt.Sprintf("%s %s:%d: %s no longer inlined (plain cost %d): %s", l.Pkg, l.File, l.Line, l.Name, d.Cost, why))
		}
	}
	for c, n := range plain.Calls {
		if m := probed.Calls[c]; m < n {
			lost = append(lost, fmt.Sprintf("%s %s:%d: %d of %d calls of %s no longer inlined", c.Pkg, c.File, c.Line, n-m, n, c.Name))
		}
	}
	slices.Sort(lost)
	return lost
}

// Inlined counts the calls b inlined.
func (b Build) Inlined() int {
	n := 0
	for _, m := range b.Calls {
		n += m
	}
	return n
}

// Inlinable counts the functions b inlines.
func (b Build) Inlinable() int {
	n := 0
	for _, d := range b.Funcs {
		if d.Inlinable {
			n++
		}
	}
	return n
}
