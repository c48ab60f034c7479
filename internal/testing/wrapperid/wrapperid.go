// Package wrapperid computes the identity that this repository's tests
// build usdt-toolexec with: what decides what the wrapper makes of a
// compile or a link, and nothing else.
//
// The go command keys every cached build step on the identity that the
// wrapper gives its tools (toolexec.InstrumenterID). Unset, that is a hash
// of the whole usdt-toolexec executable, the tracer included, so that a
// change to the tracer alone makes every instrumented build cold: about 17
// minutes of the end-to-end tests. The identity here hashes the Go build
// IDs of package internal/toolexec and of every package it imports, each
// derived from the package's files, with the command's own files
// (cmd/usdt-toolexec, which only passes the wrapper's flags on).
package wrapperid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Var is the variable that LDFlag sets.
const Var = "github.com/go-usdt/usdt/internal/toolexec.InstrumenterID"

// For returns the identity of the wrapper built from the module at root,
// with the go command's environment env (nil for this process's).
func For(root string, env []string) (string, error) {
	// A package's build ID covers its own files and the export data of
	// what it imports, not their code: the IDs of every package it
	// depends on, the standard library's included, cover all of it.
	// -trimpath keeps the module's directory out of them: a copy of the
	// same files has the same identity.
	cmd := exec.Command("go", "list", "-trimpath", "-deps", "-export", "-f", "{{.ImportPath}} {{.Standard}} {{.BuildID}}", "./internal/toolexec")
	cmd.Dir, cmd.Env = root, env
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%v\n%s", err, ee.Stderr)
		}
		return "", fmt.Errorf("go list -export ./internal/toolexec: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines {
		// unsafe, which is not compiled, has none.
		if f := strings.Fields(l); len(f) != 3 && !(len(f) == 2 && f[1] == "true") {
			return "", fmt.Errorf("go list -export printed no build ID for %s", f[0])
		}
	}
	h := sha256.New()
	for _, l := range lines {
		fmt.Fprintln(h, l)
	}
	files, err := filepath.Glob(filepath.Join(root, "cmd", "usdt-toolexec", "*.go"))
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return "src-" + hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// LDFlag returns the go build flag that sets the identity For computes.
func LDFlag(root string, env []string) (string, error) {
	id, err := For(root, env)
	if err != nil {
		return "", err
	}
	return "-ldflags=-X " + Var + "=" + id, nil
}
