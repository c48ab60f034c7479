package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary act as the usdtgen command: scripts run
// "usdtgen ..." as a separate process that calls run, so exit codes and
// output are exactly those of the real command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"usdtgen": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			// $USDTGEN_TESTDATA holds the generator's golden cases.
			dir, err := filepath.Abs(filepath.Join("..", "..", "internal", "usdtgen", "testdata"))
			env.Setenv("USDTGEN_TESTDATA", dir)
			return err
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits": cmdExits,
			"ls":    cmdLs,
		},
	})
}

// cmdExits runs a command and checks its exit status:
//
//	exits 2 usdtgen -bogus
//
// Its stdout and stderr are kept for the stdout and stderr commands.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
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

// cmdLs prints the names of the entries of a directory (default the
// current one), sorted, one a line, hidden ones included, so that a script can compare the whole
// listing with cmp and notice stray files:
//
//	ls dir
//	cmp stdout want.txt
func cmdLs(ts *testscript.TestScript, neg bool, args []string) {
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
		// testscript's own $TMPDIR; usdtgen's temporary files also start
		// with a dot but have other names, so they still show.
		if e.Name() != ".tmp" || ts.MkAbs(dir) != ts.Getenv("WORK") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintln(out, n)
	}
}
