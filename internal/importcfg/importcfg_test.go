package importcfg

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "importcfg")
	cfg := "# import config\npackagefile fmt=/cache/fmt.a\npackagefile example.com/p=/work/b002/_pkg_.a\nimportmap golang.org/x/net/idna=vendor/golang.org/x/net/idna\nmodinfo \"x\"\n\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	packagefile, importmap, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"fmt": "/cache/fmt.a", "example.com/p": "/work/b002/_pkg_.a"}; !maps.Equal(packagefile, want) {
		t.Errorf("packagefile = %v, want %v", packagefile, want)
	}
	if want := map[string]string{"golang.org/x/net/idna": "vendor/golang.org/x/net/idna"}; !maps.Equal(importmap, want) {
		t.Errorf("importmap = %v, want %v", importmap, want)
	}
	if p, m, err := Read(""); err != nil || len(p) != 0 || len(m) != 0 {
		t.Errorf("Read(\"\") = %v, %v, %v; want empty maps", p, m, err)
	}
	if _, _, err := Read(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Read of a missing file: no error")
	}
}
