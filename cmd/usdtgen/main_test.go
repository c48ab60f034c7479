package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-usdt/usdt/internal/testing/clitest"
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
		Cmds: clitest.Commands,
	})
}
