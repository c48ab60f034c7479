package toolexec

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/rules"
)

// TestRuleUse: a compile's record, in its package archive, reaches the
// link; a record of other rules does not count.
func TestRuleUse(t *testing.T) {
	r, err := rules.Parse("rules.yml", []byte("rules:\n  - package: a\n    func: F\n  - package: a\n  - package: b\n"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := rules.Parse("other.yml", []byte("rules:\n  - package: b\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archive := func(name string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("!<arch>\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := appendMember(path, "__.PKGDEF", []byte("export data")); err != nil {
			t.Fatal(err)
		}
		return path
	}
	compile := func(r *rules.Rules, out string, pack bool) {
		t.Helper()
		args := []string{"-o", out, "-p", "a"}
		if pack {
			args = append(args, "-pack")
		}
		if err := (Invocation{Args: args, Rules: r}).recordRuleUse(); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c, d := archive("a.a"), archive("b.a"), archive("c.a"), archive("d.a")
	r.Match("a", "G") // rule 2 for a's compile
	compile(r, a, true)
	other.Match("b", "F") // a compile with other rules
	compile(other, b, true)
	compile(r, c, false) // not an archive the go command made
	r.Match("a", "F")    // rule 1 for d's compile
	compile(r, d, true)
	if data, _ := os.ReadFile(a); !bytes.Contains(data, []byte("usdt-rules "+r.Hash+" 1\n")) {
		t.Errorf("a's archive holds no record of rule 2:\n%q", data)
	}
	if got := selectedRules(r, []string{a, b, c, filepath.Join(dir, "missing.a")}); !slices.Equal(got, []int{1}) {
		t.Errorf("selected %v, want [1]", got)
	}
	if got := selectedRules(r, []string{a, d}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("selected %v, want [0 1]", got)
	}
}

func TestMayHold(t *testing.T) {
	root := t.TempDir()
	mk := func(path, data string) {
		t.Helper()
		path = filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("goroot/src/net/http/server.go", "package http")
	mk("goroot/src/fmt/print.go", "package fmt")
	mk("app/go.mod", "module example.com/app\n\nrequire go.etcd.io/bbolt v1.5.0\n")
	mk("app/main.go", "package main")
	mk("app/store/store.go", "package store")
	mk("app/cmd/tool/main.go", "package main")
	mk("app/docs/README", "no Go here")
	mk("ws/go.work", "use (\n\t../app\n\t./lib\n)\n")
	mk("ws/lib/go.mod", "module example.com/lib\n\nrequire golang.org/x/sync v0.1.0\n")
	mk("ws/lib/lib.go", "package lib")
	goroot := filepath.Join(root, "goroot")
	t.Setenv("GOWORK", "")
	t.Setenv("GO111MODULE", "")

	tests := []struct {
		dir     string
		pattern string
		want    bool
	}{
		{"app", "example.com/app", true},
		{"app", "example.com/app/store", true},
		{"app", "example.com/app/stor", false},
		{"app", "example.com/app/cmd", false}, // no Go files
		{"app", "example.com/app/cmd/...", true},
		{"app", "example.com/app/docs", false},
		{"app", "example.com/app/nowhere/...", false},
		{"app", "example.com/...", true},
		{"app", "go.etcd.io/bbolt", true},
		{"app", "go.etcd.io/bbolt/internal/common", true},
		{"app", "go.etcd.io/bolt", false},
		{"app", "go.etcd.io/...", true},
		{"app", "net/http", true},
		{"app", "net/...", true},
		{"app", "net/htp", false},
		{"app", "main", false},
		{"app", ".../internal/...", true},
		{"ws/lib", "example.com/app/store", true},
		{"ws/lib", "example.com/lib", true},
		{"ws/lib", "golang.org/x/sync/errgroup", true},
		{"ws/lib", "example.com/lib/missing", false},
	}
	for _, tt := range tests {
		tree := newBuildTree(goroot, filepath.Join(root, tt.dir))
		if got := tree.mayHold(tt.pattern); got != tt.want {
			t.Errorf("from %s: mayHold(%q) = %v, want %v", tt.dir, tt.pattern, got, tt.want)
		}
	}

	t.Setenv("GOWORK", "off")
	if newBuildTree(goroot, filepath.Join(root, "ws", "lib")).mayHold("example.com/app/store") {
		t.Errorf("GOWORK=off: the workspace's other module is still a main module")
	}
	t.Setenv("GO111MODULE", "off")
	if tree := newBuildTree(goroot, filepath.Join(root, "app")); tree.mayHold("example.com/app/store") || !tree.mayHold("fmt") {
		t.Errorf("GO111MODULE=off: %+v", tree)
	}
}

// TestWarnUnmatched: the link names its main package from the archive it
// is given last, and prints warnings, and notes only with -v.
func TestWarnUnmatched(t *testing.T) {
	t.Setenv("GOWORK", "off")
	goroot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(goroot, "src", "fmt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(goroot, "src", "fmt", "print.go"), []byte("package fmt"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := rules.Parse("rules.yml", []byte("rules:\n  - package: example.com/app\n  - package: main\n  - package: fmt\n"))
	if err != nil {
		t.Fatal(err)
	}
	packagefile := map[string]string{"example.com/app": "/work/b001/_pkg_.a", "runtime": "/cache/runtime-d"}
	warning := `usdt-toolexec: warning: rules.yml:3:5: rule 2 selects no function: package "main" names no package` + "\n" +
		"\thint: rules name a main package by its import path, as go list prints it (the module's path for one at the module's root): " +
		`package: "example.com/app" for this binary's` + "\n"
	note := `usdt-toolexec: rules.yml:4:5: rule 3 selects no function in this binary, which links no package "fmt" matches` + "\n"
	for _, tt := range []struct {
		verbose bool
		want    string
	}{
		{false, warning},
		{true, warning + note},
	} {
		var stderr strings.Builder
		inv := Invocation{
			Runner:  Runner{Stderr: &stderr},
			Verbose: tt.verbose,
			Tool:    filepath.Join(goroot, "pkg", "tool", "linux_amd64", "link"),
			Args:    []string{"-o", "app", "-importcfg", "importcfg.link", "/work/b001/_pkg_.a"},
			Rules:   r,
		}
		inv.warnUnmatched(packagefile, []int{0})
		if got := stderr.String(); got != tt.want {
			t.Errorf("-v=%v: got\n%s\nwant\n%s", tt.verbose, got, tt.want)
		}
	}
}
