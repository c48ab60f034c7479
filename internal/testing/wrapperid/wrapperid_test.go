package wrapperid

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestIdentity computes the identity on copies of this module's sources:
// a change to the tracer keeps it, and a change to the instrumenting code
// or to the command's files makes a new one.
func TestIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiles the instrumenting packages of three copies of the module")
	}
	root := moduleRoot(t)
	base := copyModule(t, root)
	want, err := For(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file    string // changed, a comment added
		changes bool
	}{
		{"internal/trace/ring.go", false},
		{"internal/export/otlp/otlp.go", false},
		{"internal/ring/session.go", false},
		// The tracer's decoder of values: the writer knows only valueop.
		{"internal/values/decode.go", false},
		{"internal/valueop/valueop.go", true},
		{"rewrite/rewrite.go", true},
		{"internal/ringlayout/layout.go", true},
		{"cmd/usdt-toolexec/main.go", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			dir := copyModule(t, root)
			f, err := os.OpenFile(filepath.Join(dir, tc.file), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("\n// A change.\n")
			f.Close()
			got, err := For(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if changed := got != want; changed != tc.changes {
				t.Errorf("a comment added to %s: identity %s, before %s; want changed %v", tc.file, got, want, tc.changes)
			}
		})
	}
}

// TestLDFlag builds usdt-toolexec with LDFlag and asks it for the
// compiler's identity, as the go command does: the answer carries the
// identity, so the flag names the variable the wrapper reads.
func TestLDFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds usdt-toolexec")
	}
	root := moduleRoot(t)
	flag, err := LDFlag(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := For(root, nil)
	bin := filepath.Join(t.TempDir(), "usdt-toolexec")
	build := exec.Command("go", "build", flag, "-o", bin, "./cmd/usdt-toolexec")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", flag, err, out)
	}
	tooldir, err := exec.Command("go", "env", "GOTOOLDIR").Output()
	if err != nil {
		t.Fatal(err)
	}
	compile := filepath.Join(strings.TrimSpace(string(tooldir)), "compile")
	out, err := exec.Command(bin, compile, "-V=full").CombinedOutput()
	if err != nil {
		t.Fatalf("usdt-toolexec compile -V=full: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "usdt-toolexec") || !strings.Contains(string(out), id+"-rules-") {
		t.Errorf("usdt-toolexec built with %s answers -V=full with %q, want the identity %s in it", flag, out, id)
	}
}

// moduleRoot is this module's root directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// copyModule copies the module at root, but for its testdata and .git,
// into a new directory.
func copyModule(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "bin":
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
