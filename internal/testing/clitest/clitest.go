// Package clitest holds the testscript commands the command-line tests of
// usdtgen and usdt-toolexec share.
package clitest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// Commands are the extra script commands: "exits CODE cmd args..." and
// "ls [dir]".
var Commands = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"exits": exits,
	"ls":    ls,
}

// exits runs a command and checks its exit status:
//
//	exits 2 usdtgen -bogus
//
// Its stdout and stderr are kept for the stdout and stderr commands.
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad exit code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		got = exit.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// ls prints the names of the entries of a directory (default the
// current one), sorted, one a line, hidden ones included, so that a script can compare
// the whole listing with cmp and notice stray files:
//
//	ls dir
//	cmp stdout want.txt
func ls(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 {
		ts.Fatalf("usage: ls [dir]")
	}
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	out := ts.Stdout() // an empty listing must still replace stdout
	entries, err := os.ReadDir(ts.MkAbs(dir))
	ts.Check(err)
	var names []string
	for _, e := range entries {
		// testscript's own $TMPDIR; the commands' temporary files also
		// start with a dot but have other names, so they still show.
		if e.Name() != ".tmp" || ts.MkAbs(dir) != ts.Getenv("WORK") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintln(out, n)
	}
}
