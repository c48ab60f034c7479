package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/clitest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary act as usdt-toolexec: scripts run it as a
// separate process, so exit codes and output are the real command's.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"usdt-toolexec": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

func TestScript(t *testing.T) {
	out, err := exec.Command("go", "env", "GOTOOLDIR").Output()
	if err != nil {
		t.Fatal(err)
	}
	toolDir := strings.TrimSpace(string(out))
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("GOTOOLDIR", toolDir)
			return nil
		},
		Cmds: clitest.Commands,
	})
}

func TestFlagValue(t *testing.T) {
	args := []string{"-o", "out.a", "-p=example.com/x", "-trimpath", "$WORK/b001=>", "a.go"}
	tests := []struct{ name, want string }{
		{"o", "out.a"},
		{"p", "example.com/x"},
		{"trimpath", "$WORK/b001=>"},
		{"importcfg", ""},
	}
	for _, tt := range tests {
		if got := flagValue(args, tt.name); got != tt.want {
			t.Errorf("flagValue(-%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDecodeArg(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{`a\nb`, "a\nb"},
		{`back\\slash`, `back\slash`},
		{`trailing\`, `trailing\`},
		{`other\t`, `other\t`},
	}
	for _, tt := range tests {
		if got := decodeArg(tt.in); got != tt.want {
			t.Errorf("decodeArg(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
