package gomod

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestImportPath(t *testing.T) {
	root := t.TempDir()
	if ImportPath(root) != "" {
		t.Skipf("%s is inside a module", root)
	}
	mk := func(dir, gomod string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if gomod != "" {
			if err := os.WriteFile(filepath.Join(root, dir, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("m", "// The module.\nmodule example.com/m\n\ngo 1.25\n\nrequire example.com/dep v1.0.0\n")
	mk("m/a/b", "")
	mk("m/nested", "module example.com/other\n")
	mk("m/nested/pkg", "")
	mk("quoted", "module \"example.com/quoted\"\n")
	mk("tab", "module\texample.com/tab\r\n")
	mk("comment", "module example.com/comment // the module\n")
	mk("nomodule", "go 1.25\n")
	mk("nomodule/sub", "")
	mk("prefix", "modulex example.com/nope\nmodule example.com/prefix\n")
	mk("plain", "")

	tests := []struct{ dir, want string }{
		{"m", "example.com/m"},
		{"m/a", "example.com/m/a"},
		{"m/a/b", "example.com/m/a/b"},
		{"m/a/b/..", "example.com/m/a"},
		{"m/nested", "example.com/other"},
		{"m/nested/pkg", "example.com/other/pkg"},
		{"quoted", "example.com/quoted"},
		{"tab", "example.com/tab"},
		{"comment", "example.com/comment"},
		{"prefix", "example.com/prefix"},
		// A go.mod without a module line ends the search.
		{"nomodule/sub", ""},
		{"plain", ""},
	}
	for _, tt := range tests {
		if got := ImportPath(filepath.Join(root, tt.dir)); got != tt.want {
			t.Errorf("ImportPath(%s) = %q, want %q", tt.dir, got, tt.want)
		}
	}

	// A relative directory is taken from the working directory.
	t.Chdir(filepath.Join(root, "m", "a"))
	for dir, want := range map[string]string{".": "example.com/m/a", "b": "example.com/m/a/b", "..": "example.com/m"} {
		if got := ImportPath(dir); got != want {
			t.Errorf("ImportPath(%q) in m/a = %q, want %q", dir, got, want)
		}
	}
}

func TestDirectives(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name, data string
		read       func(string) []string
		want       []string
	}{
		{"go.mod", "module example.com/m\n\ngo 1.25\n\nrequire example.com/one v1.0.0\n\nrequire (\n\tgo.etcd.io/bbolt v1.5.0 // indirect\n\t\"example.com/quoted\" v0.1.0\n\n)\n\nreplace example.com/one => ../one\n",
			Requires, []string{"example.com/one", "go.etcd.io/bbolt", "example.com/quoted"}},
		{"none.mod", "module example.com/m\n// require example.com/commented v1\n", Requires, nil},
		{"go.work", "go 1.25\n\nuse (\n\t./a\n\t/abs/b // a comment\n)\nuse ./c\n", Uses,
			[]string{filepath.Join(dir, "a"), "/abs/b", filepath.Join(dir, "c")}},
	}
	for _, tt := range tests {
		if got := tt.read(write(tt.name, tt.data)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := Requires(filepath.Join(dir, "missing.mod")); got != nil {
		t.Errorf("a missing file: %q", got)
	}
}
