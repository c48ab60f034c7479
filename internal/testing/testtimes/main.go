// Command testtimes runs go test -json and prints what go test would
// have printed without -json, then, for each package whose tests took
// longer than -over, its slowest top-level tests. make unit runs the
// tests through it, so that a CI log says where a run's time went.
//
// Usage:
//
//	go run ./internal/testing/testtimes [-n 12] [-over 60s] -- go test -json ARGS...
//
// It exits with the command's status. A package's output is printed
// when the package ends, as go test prints it, so that the output of
// packages run side by side does not interleave.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 12, "how many of a package's slowest tests to name")
	over := flag.Duration("over", time.Minute, "name the slowest tests of the packages that took longer than this")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testtimes [-n N] [-over D] -- go test -json ARGS...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v (is %s on PATH?)\n", err, flag.Arg(0))
		os.Exit(2)
	}
	w := bufio.NewWriter(os.Stdout)
	r := newReport(w, *n, *over)
	if err := r.read(out); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes: reading the command's output:", err)
	}
	if r.anyFailed {
		// As go test ends a run in which a package failed.
		fmt.Fprintln(w, "FAIL")
	}
	r.summary()
	w.Flush()
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(2)
	}
}

// event is the part of a test2json event that testtimes reads.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is a top-level test's time.
type timing struct {
	test    string
	elapsed time.Duration
}

// line is a line of a test's output.
type line struct {
	test, text string
}

// report gathers a run's output and times.
type report struct {
	w    io.Writer
	n    int
	over time.Duration
	// pending is each running package's output, printed when it ends
	// but for the lines of its tests in passed, which passed or skipped;
	// those of a test that failed, or never ended (a panic, a timeout),
	// are printed.
	pending map[string][]line
	passed  map[string]map[string]bool
	tests   map[string][]timing
	// ended is each package that ended, in order, with its time.
	ended     []timing
	anyFailed bool
	// first is the time of the run's first event, and started each
	// package's start (test2json's "start"), so that the summary says
	// when in the run a slow package began: a package that starts late
	// lengthens the run by as much.
	first   time.Time
	started map[string]time.Time
}

func newReport(w io.Writer, n int, over time.Duration) *report {
	return &report{w: w, n: n, over: over, pending: map[string][]line{}, passed: map[string]map[string]bool{}, tests: map[string][]timing{}, started: map[string]time.Time{}}
}

// read copies the command's output as go test without -json would
// print it, and keeps the times.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		b := sc.Bytes()
		var e event
		if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
			// Not an event: the go command's own words.
			fmt.Fprintf(r.w, "%s\n", b)
			continue
		}
		r.add(e)
	}
	// The packages a killed run left unended show all they printed.
	for _, pkg := range slices.Sorted(maps.Keys(r.pending)) {
		for _, l := range r.pending[pkg] {
			io.WriteString(r.w, l.text)
		}
	}
	return sc.Err()
}

func (r *report) add(e event) {
	if r.first.IsZero() && !e.Time.IsZero() {
		r.first = e.Time
	}
	switch e.Action {
	case "start":
		if e.Test == "" {
			r.started[e.Package] = e.Time
		}
	case "build-output":
		io.WriteString(r.w, e.Output)
	case "output":
		r.pending[e.Package] = append(r.pending[e.Package], line{e.Test, e.Output})
	case "pass", "fail", "skip":
		if e.Test != "" {
			if e.Action != "fail" {
				if r.passed[e.Package] == nil {
					r.passed[e.Package] = map[string]bool{}
				}
				r.passed[e.Package][e.Test] = true
			}
			if !strings.Contains(e.Test, "/") {
				r.tests[e.Package] = append(r.tests[e.Package], timing{e.Test, seconds(e.Elapsed)})
			}
			return
		}
		r.print(e.Package, e.Action == "fail")
		r.anyFailed = r.anyFailed || e.Action == "fail"
		r.ended = append(r.ended, timing{e.Package, seconds(e.Elapsed)})
	}
}

// print writes what go test prints of a package that ended: its own
// lines, and those of its tests that did not pass or skip, without the
// lines that -v adds.
func (r *report) print(pkg string, failed bool) {
	for _, l := range r.pending[pkg] {
		switch {
		case l.test == "" && !failed && l.text == "PASS\n":
		case r.passed[pkg][l.test]:
		case framing(l.text):
		default:
			io.WriteString(r.w, l.text)
		}
	}
	delete(r.pending, pkg)
	delete(r.passed, pkg)
	// Out now: a run killed later (CI's time limit) still shows every
	// package that ended.
	if f, ok := r.w.(interface{ Flush() error }); ok {
		f.Flush()
	}
}

// framing reports whether s is a line that only -v prints.
func framing(s string) bool {
	for _, p := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME "} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// summary names the slowest tests of each package that took longer
// than r.over.
func (r *report) summary() {
	for _, p := range r.ended {
		if p.elapsed <= r.over || len(r.tests[p.test]) == 0 {
			continue
		}
		fmt.Fprintf(r.w, "testtimes: %s took %v", p.test, p.elapsed.Round(time.Second))
		if at, ok := r.started[p.test]; ok && !at.IsZero() {
			fmt.Fprintf(r.w, ", from %v into the run", at.Sub(r.first).Round(time.Second))
		}
		fmt.Fprint(r.w, "; its slowest tests:")
		for _, t := range slowest(r.tests[p.test], r.n) {
			fmt.Fprintf(r.w, " %s %.1fs", t.test, t.elapsed.Seconds())
		}
		fmt.Fprintln(r.w)
	}
}

// slowest returns the n longest of ts, longest first, ties by name.
func slowest(ts []timing, n int) []timing {
	s := slices.Clone(ts)
	slices.SortFunc(s, func(a, b timing) int {
		if c := cmp.Compare(b.elapsed, a.elapsed); c != 0 {
			return c
		}
		return strings.Compare(a.test, b.test)
	})
	return s[:min(n, len(s))]
}
