package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/testing/clitest"
	"github.com/go-usdt/usdt/internal/testing/wrapperid"
	"github.com/go-usdt/usdt/internal/toolexec"
	"github.com/rogpeppe/go-internal/testscript"
)

// instrumenterEnv gives the test binary, run as usdt-toolexec, the
// identity of its instrumenting code (toolexec.InstrumenterID), as the
// e2e harness builds the wrapper with: the test binary links the tracer
// too, and with the whole executable as its identity, each change to the
// tracer made every build of the scripts cold (181 s against 51 s warm).
// Unset, as version.txtar unsets it, the identity is the executable's,
// as users' builds have it.
const instrumenterEnv = "USDT_TEST_INSTRUMENTER_ID"

// TestMain lets the test binary act as usdt-toolexec: scripts run it as a
// separate process, so exit codes and output are the real command's.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"usdt-toolexec": func() {
			toolexec.InstrumenterID = os.Getenv(instrumenterEnv)
			os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
		},
	})
}

func TestScript(t *testing.T) {
	out, err := exec.Command("go", "env", "GOTOOLDIR", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	goEnv := strings.Split(strings.TrimSpace(string(out)), "\n")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	id, err := wrapperid.For(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	// go get -tool loads the whole module graph, go.mod files that a build
	// never reads included (gopkg.in/check.v1, which yaml.v3 requires):
	// fetch them now, while the proxy is reachable, or the scripts' go get
	// fails offline on a fresh module cache.
	list := exec.Command("go", "list", "-m", "all")
	list.Dir = root
	if out, err := list.CombinedOutput(); err != nil {
		t.Fatalf("go list -m all, to fill the module cache the scripts use offline: %v\n%s", err, out)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("GOTOOLDIR", goEnv[0])
			// The caches are shared, not rebuilt per script, and no
			// module is fetched: a module that needs this one points
			// at the checkout ($USDT_ROOT) with a replace directive.
			env.Setenv("GOCACHE", goEnv[1])
			env.Setenv("GOMODCACHE", goEnv[2])
			env.Setenv("GOPROXY", "off")
			env.Setenv("GOFLAGS", "-mod=mod")
			env.Setenv("GOTOOLCHAIN", "local")
			env.Setenv("USDT_ROOT", root)
			env.Setenv(instrumenterEnv, id)
			return nil
		},
		Cmds: clitest.Commands,
	})
}
