package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/gomod"
)

// newModule makes dir/go.mod and dir/sub/pkg, and returns dir.
func newModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLocate(t *testing.T) {
	t.Setenv(EnvVar, "")
	t.Setenv("GO111MODULE", "")
	mod := newModule(t)
	pkg := filepath.Join(mod, "sub", "pkg")

	// No usdt.yml: no rules, no error.
	if got, err := Locate("", pkg); got != "" || err != nil {
		t.Errorf("without usdt.yml: %q, %v", got, err)
	}

	auto := filepath.Join(mod, "usdt.yml")
	writeFile(t, auto, "rules: [{package: a}]\n")
	for _, dir := range []string{mod, pkg} {
		if got, err := Locate("", dir); got != auto || err != nil {
			t.Errorf("Locate(\"\", %s) = %q, %v, want %q", dir, got, err, auto)
		}
	}

	// A nested module is a module root of its own: the outer usdt.yml is
	// not its rules file, as `go env GOMOD` would not name the outer go.mod.
	inner := filepath.Join(mod, "sub")
	writeFile(t, filepath.Join(inner, "go.mod"), "module example.com/inner\n")
	if got, err := Locate("", pkg); got != "" || err != nil {
		t.Errorf("nested module: %q, %v, want none", got, err)
	}

	// $USDT_RULES beats usdt.yml; relative paths are taken from dir.
	env := filepath.Join(mod, "env.yml")
	writeFile(t, env, "rules: [{package: b}]\n")
	t.Setenv(EnvVar, env)
	if got, err := Locate("", mod); got != env || err != nil {
		t.Errorf("with $%s: %q, %v, want %q", EnvVar, got, err, env)
	}
	t.Setenv(EnvVar, "env.yml")
	if got, err := Locate("", mod); got != env || err != nil {
		t.Errorf("with relative $%s: %q, %v, want %q", EnvVar, got, err, env)
	}

	// The flag beats both.
	flag := filepath.Join(mod, "flag.yml")
	writeFile(t, flag, "rules: [{package: c}]\n")
	if got, err := Locate("flag.yml", mod); got != flag || err != nil {
		t.Errorf("with flag: %q, %v, want %q", got, err, flag)
	}

	// Named files must exist.
	if _, err := Locate("missing.yml", mod); err == nil || !strings.Contains(err.Error(), "rules flag") {
		t.Errorf("missing flag file: %v", err)
	}
	t.Setenv(EnvVar, "missing.yml")
	if _, err := Locate("", mod); err == nil || !strings.Contains(err.Error(), "$"+EnvVar) {
		t.Errorf("missing $%s file: %v", EnvVar, err)
	}
	if _, err := Locate(mod, mod); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory as flag: %v", err)
	}
}

func TestLocateNoModule(t *testing.T) {
	t.Setenv(EnvVar, "")
	t.Setenv("GO111MODULE", "")
	dir := t.TempDir() // assumes no go.mod above the temp dir, as in /tmp
	if gomod.Root(dir, "go.mod") != "" || gomod.Root(dir, "go.work") != "" {
		t.Skip("a go.mod or go.work sits above the temp directory")
	}
	writeFile(t, filepath.Join(dir, "usdt.yml"), "rules: [{package: a}]\n")
	if got, err := Locate("", dir); got != "" || err != nil {
		t.Errorf("outside a module: %q, %v, want none", got, err)
	}
}

func TestLocateGO111MODULEOff(t *testing.T) {
	t.Setenv(EnvVar, "")
	mod := newModule(t)
	writeFile(t, filepath.Join(mod, "usdt.yml"), "rules: [{package: a}]\n")
	t.Setenv("GO111MODULE", "off")
	if got, err := Locate("", mod); got != "" || err != nil {
		t.Errorf("GO111MODULE=off: %q, %v, want none", got, err)
	}
}

func TestLocateRelativeDir(t *testing.T) {
	t.Setenv(EnvVar, "")
	t.Setenv("GO111MODULE", "")
	mod := newModule(t)
	want := filepath.Join(mod, "usdt.yml")
	writeFile(t, want, "rules: [{package: a}]\n")
	t.Chdir(filepath.Join(mod, "sub"))
	for _, dir := range []string{"", ".", "pkg"} {
		if got, err := Locate("", dir); got != want || err != nil {
			t.Errorf("Locate(\"\", %q) = %q, %v, want %q", dir, got, err, want)
		}
	}
}

func TestLocateUsdtYmlIsDir(t *testing.T) {
	t.Setenv(EnvVar, "")
	t.Setenv("GO111MODULE", "")
	mod := newModule(t)
	if err := os.Mkdir(filepath.Join(mod, "usdt.yml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Locate("", mod); err == nil {
		t.Error("usdt.yml directory: no error")
	}
}

func TestLocateWorkspace(t *testing.T) {
	t.Setenv(EnvVar, "")
	t.Setenv("GO111MODULE", "")
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.work"), "go 1.24\n\nuse ./app\n")
	if err := os.Mkdir(filepath.Join(root, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "app", "go.mod"), "module example.com/app\n")
	writeFile(t, filepath.Join(root, "usdt.yml"), "rules: [{package: a}]\n")
	app := filepath.Join(root, "app")
	if got, err := Locate("", app); err != nil || got != filepath.Join(root, "usdt.yml") {
		t.Errorf("workspace rules: %q, %v", got, err)
	}
	// A module's own usdt.yml wins over the workspace's.
	writeFile(t, filepath.Join(app, "usdt.yml"), "rules: [{package: b}]\n")
	if got, err := Locate("", app); err != nil || got != filepath.Join(app, "usdt.yml") {
		t.Errorf("module rules in a workspace: %q, %v", got, err)
	}
	// From the workspace root itself, outside any module.
	os.Remove(filepath.Join(app, "usdt.yml"))
	if got, err := Locate("", root); err != nil || got != filepath.Join(root, "usdt.yml") {
		t.Errorf("workspace root: %q, %v", got, err)
	}
}
