package objcache

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDescribe(t *testing.T) {
	work := t.TempDir()
	src := filepath.Join(work, "main.go")
	if err := os.WriteFile(src, []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(objdir, buildID string, extra ...string) []string {
		return append([]string{"-o", filepath.Join(work, objdir, "_pkg_.a"), "-trimpath", filepath.Join(work, objdir) + "=>", "-p", "main", "-buildid", buildID, "-pack"}, append(extra, src)...)
	}
	base, ok := describe("compile version go1.26", args("b001", "aaaa/aaaa"))
	if !ok {
		t.Fatal("a plain compile is not cached")
	}
	tests := []struct {
		name    string
		toolID  string
		args    []string
		ok      bool
		sameKey bool
	}{
		{"another build ID and objdir", "compile version go1.26", args("b007", "bbbb/bbbb"), true, true},
		{"another compiler", "compile version go1.27", args("b001", "aaaa/aaaa"), true, false},
		{"another flag", "compile version go1.26", args("b001", "aaaa/aaaa", "-N"), true, false},
		{"no output", "compile version go1.26", []string{"-p", "main", "-buildid", "a/a", src}, false, false},
		{"no build ID", "compile version go1.26", []string{"-o", filepath.Join(work, "b001", "_pkg_.a"), src}, false, false},
		{"coverage", "compile version go1.26", args("b001", "aaaa/aaaa", "-coveragecfg", filepath.Join(work, "cfg")), false, false},
		{"a missing source", "compile version go1.26", append(args("b001", "aaaa/aaaa"), filepath.Join(work, "gone.go")), false, false},
		{"an import configuration that is not there", "compile version go1.26", args("b001", "aaaa/aaaa", "-importcfg", filepath.Join(work, "importcfg")), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := describe(tt.toolID, tt.args)
			if ok != tt.ok {
				t.Fatalf("cached: %v, want %v", ok, tt.ok)
			}
			if ok && (c.key == base.key) != tt.sameKey {
				t.Errorf("same key as the first compile: %v, want %v", c.key == base.key, tt.sameKey)
			}
		})
	}
}

// TestSourceContent checks that a source's content, not its name, keys
// the compile.
func TestSourceContent(t *testing.T) {
	work := t.TempDir()
	src := filepath.Join(work, "main.go")
	key := func(content string) string {
		if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		c, ok := describe("compile", []string{"-o", filepath.Join(work, "b001", "_pkg_.a"), "-buildid", "a/a", src})
		if !ok {
			t.Fatal("not cached")
		}
		return c.key
	}
	if key("package main\n") == key("package main // edited\n") {
		t.Error("an edited source has the key of the original")
	}
}

// TestReuseDamaged checks that an entry that does not decode is a miss,
// never a half-written output.
func TestReuseDamaged(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	work := t.TempDir()
	src := filepath.Join(work, "main.go")
	if err := os.WriteFile(src, []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "b001", "_pkg_.a")
	c, ok := describe("compile", []string{"-o", out, "-buildid", "a/a", src})
	if !ok {
		t.Fatal("not cached")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "usdt-toolexec"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, entry := range [][]byte{{}, {0xff}, {3, 'a', '/', 'a', 200}} {
		if err := os.WriteFile(filepath.Join(dir, "usdt-toolexec", c.key), entry, 0o644); err != nil {
			t.Fatal(err)
		}
		if c.reuse(nil, nil) {
			t.Errorf("entry %q was reused", entry)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("entry %q wrote the output", entry)
		}
	}
}
