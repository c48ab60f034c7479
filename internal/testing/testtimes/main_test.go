package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSameAsGoTest runs the tests of testdata/sample through testtimes
// and through go test itself, without -json: both print the same lines
// (testtimes in -v's order within a test, and the packages as they
// end), and exit with the same status; testtimes then names each
// package's slowest tests.
func TestSameAsGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go test twice")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := filepath.Join(t.TempDir(), "testtimes")
	if out, err := exec.Command(goCmd, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join("testdata", "sample")
	run := func(name string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v", name, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	want, wantStatus := run(goCmd, "test", "-count=1", "./a", "./b")
	got, gotStatus := run(bin, "-over", "0", "--", goCmd, "test", "-count=1", "-json", "./a", "./b")
	if gotStatus != wantStatus || wantStatus != 1 {
		t.Errorf("testtimes exited %d, go test %d; want both 1 (a test fails)", gotStatus, wantStatus)
	}
	var summary []string
	var lines []string
	for l := range strings.Lines(got) {
		if strings.HasPrefix(l, "testtimes: ") {
			summary = append(summary, l)
		} else {
			lines = append(lines, l)
		}
	}
	if g, w := normalize(lines), normalize(slices.Collect(strings.Lines(want))); !slices.Equal(g, w) {
		t.Errorf("testtimes printed, times taken out and sorted:\n%s\ngo test:\n%s", strings.Join(g, ""), strings.Join(w, ""))
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^testtimes: example.com/sample/a took \S+, from \S+ into the run; its slowest tests: TestSlow 0\.[3-9]s TestSubtests 0\.\ds TestFast 0\.\ds$`),
		regexp.MustCompile(`(?m)^testtimes: example.com/sample/b took \S+, from \S+ into the run; its slowest tests: (Test(Fails|Passes|Skips) 0\.\ds ?){3}$`),
	} {
		if !want.MatchString(strings.Join(summary, "")) {
			t.Errorf("no summary line matches %s:\n%s", want, strings.Join(summary, ""))
		}
	}

	// A panic's lines are the panicking test's, which never ends: they
	// show, and a passing test's log does not.
	got, status := run(bin, "--", goCmd, "test", "-count=1", "-json", "./c")
	for _, want := range []string{"panic: boom", "FAIL\texample.com/sample/c\t"} {
		if !strings.Contains(got, want) || status != 1 {
			t.Errorf("testtimes of a panicking test exited %d and does not print %q:\n%s", status, want, got)
		}
	}
	if strings.Contains(got, "not shown") {
		t.Errorf("testtimes printed a passing test's log:\n%s", got)
	}

	// By default only packages that took over a minute are named.
	got, _ = run(bin, "--", goCmd, "test", "-count=1", "-json", "./a")
	if strings.Contains(got, "testtimes:") {
		t.Errorf("a package of 0.3 s is named without -over:\n%s", got)
	}
}

var times = regexp.MustCompile(`\(\d+\.\d+s\)|\t\d+\.\d+s$`)

// normalize takes the times out of lines and sorts them.
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, times.ReplaceAllString(strings.TrimSuffix(l, "\n"), "TIME")+"\n")
	}
	slices.Sort(out)
	return out
}

func TestSlowest(t *testing.T) {
	in := []timing{{"TestB", 2}, {"TestA", 2}, {"TestC", 5}, {"TestD", 1}}
	for _, c := range []struct {
		n    int
		want []string
	}{
		{0, nil},
		{2, []string{"TestC", "TestA"}},
		{9, []string{"TestC", "TestA", "TestB", "TestD"}},
	} {
		var got []string
		for _, tm := range slowest(in, c.n) {
			got = append(got, tm.test)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("slowest(%d) = %v, want %v", c.n, got, c.want)
		}
	}
	if in[0].test != "TestB" {
		t.Errorf("slowest sorted its argument: %v", in)
	}
}

// TestFlushedAsPackagesEnd: a package's lines are out when it ends,
// while the run goes on, so that a run killed later (CI's time limit)
// still shows every package that ended.
func TestFlushedAsPackagesEnd(t *testing.T) {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	r := newReport(w, 3, time.Minute)
	in, events := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- r.read(in) }()
	fmt.Fprintln(events, `{"Action":"output","Package":"example.com/a","Output":"ok  \texample.com/a\t0.01s\n"}`)
	fmt.Fprintln(events, `{"Action":"pass","Package":"example.com/a","Elapsed":0.01}`)
	// The pipe hands the next write over only once read took the last
	// line, and a and b's lines are written before it reads on.
	fmt.Fprintln(events, `{"Action":"output","Package":"example.com/b","Output":"=== RUN   TestB\n"}`)
	fmt.Fprintln(events, `{"Action":"output","Package":"example.com/b","Output":"=== RUN   TestB\n"}`)
	if got := out.String(); got != "ok  \texample.com/a\t0.01s\n" {
		t.Errorf("while b runs, the output is %q, want a's line", got)
	}
	events.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSummaryStart: a slow package's line says when in the run it
// started, from test2json's start event, so that a CI log shows a long
// package that began late.
func TestSummaryStart(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		events []event
		want   string
	}{
		{"late", []event{
			{Time: t0, Action: "start", Package: "a"},
			{Time: t0.Add(90 * time.Second), Action: "start", Package: "b"},
			{Action: "pass", Package: "b", Test: "TestX", Elapsed: 100},
			{Action: "pass", Package: "b", Elapsed: 100},
		}, "testtimes: b took 1m40s, from 1m30s into the run; its slowest tests: TestX 100.0s\n"},
		{"no start event", []event{
			{Action: "pass", Package: "b", Test: "TestX", Elapsed: 100},
			{Action: "pass", Package: "b", Elapsed: 100},
		}, "testtimes: b took 1m40s; its slowest tests: TestX 100.0s\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			r := newReport(&out, 3, time.Minute)
			for _, e := range c.events {
				r.add(e)
			}
			out.Reset()
			r.summary()
			if got := out.String(); got != c.want {
				t.Errorf("summary:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}
