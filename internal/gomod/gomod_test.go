package gomod

import (
	"os"
	"path/filepath"
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
