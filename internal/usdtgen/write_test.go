package usdtgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// dirContents returns every file in dir with its content.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(data)
	}
	return m
}

func wantContents(files []File) map[string]string {
	m := map[string]string{}
	for _, f := range files {
		m[f.Name] = string(f.Data)
	}
	return m
}

func checkDir(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := dirContents(t, dir)
	for name, data := range got {
		if w, ok := want[name]; !ok {
			t.Errorf("unexpected file %s in %s", name, dir)
		} else if data != w {
			t.Errorf("%s holds %q, want %q", name, data, w)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing from %s", name, dir)
		}
	}
}

var past = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// age sets the modification time of every file in dir to past.
func age(t *testing.T, dir string) {
	t.Helper()
	for name := range dirContents(t, dir) {
		if err := os.Chtimes(filepath.Join(dir, name), past, past); err != nil {
			t.Fatal(err)
		}
	}
}

func mtime(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	files := []File{
		{"a_usdt_amd64.s", []byte("amd64\n")},
		{"a_usdt_cgo.go", []byte("package a\n")},
		{"a_usdt_other.go", []byte("package a // other\n")},
	}

	// A fresh directory gets every file, readable by everyone.
	changed, err := Write(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_usdt_amd64.s", "a_usdt_cgo.go", "a_usdt_other.go"}; !slices.Equal(changed, want) {
		t.Errorf("first Write changed %q, want %q", changed, want)
	}
	checkDir(t, dir, wantContents(files))
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644", f.Name, fi.Mode().Perm())
		}
	}

	// The same files again: nothing is touched.
	age(t, dir)
	changed, err = Write(dir, files)
	if err != nil || len(changed) != 0 {
		t.Errorf("second Write = %q, %v; want nothing changed", changed, err)
	}
	checkDir(t, dir, wantContents(files))
	for _, f := range files {
		if m := mtime(t, filepath.Join(dir, f.Name)); !m.Equal(past) {
			t.Errorf("%s rewritten (mtime %v) although unchanged", f.Name, m)
		}
	}

	// One file changed by the generator, one edited by hand: both are
	// rewritten, the third keeps its time.
	files[1].Data = []byte("package a // new\n")
	if err := os.WriteFile(filepath.Join(dir, "a_usdt_other.go"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	age(t, dir)
	changed, err = Write(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_usdt_cgo.go", "a_usdt_other.go"}; !slices.Equal(changed, want) {
		t.Errorf("third Write changed %q, want %q", changed, want)
	}
	checkDir(t, dir, wantContents(files))
	if m := mtime(t, filepath.Join(dir, "a_usdt_amd64.s")); !m.Equal(past) {
		t.Errorf("unchanged a_usdt_amd64.s rewritten (mtime %v)", m)
	}
	for _, name := range changed {
		if m := mtime(t, filepath.Join(dir, name)); m.Equal(past) {
			t.Errorf("%s reported changed but keeps its old mtime", name)
		}
	}

	// Files Write is not given are left alone.
	if err := os.WriteFile(filepath.Join(dir, "mine.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, files[:1]); err != nil {
		t.Fatal(err)
	}
	want := wantContents(files)
	want["mine.go"] = "package a\n"
	checkDir(t, dir, want)
}

// TestWriteFailureWritesNothing makes the second file of a set impossible
// to create and checks that the first, although written to a temporary
// file already, does not replace its destination.
func TestWriteFailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	old := []File{{"a_usdt_cgo.go", []byte("old\n")}}
	if _, err := Write(dir, old); err != nil {
		t.Fatal(err)
	}
	files := []File{
		{"a_usdt_cgo.go", []byte("new\n")},
		{"missing/a_usdt_other.go", []byte("new\n")},
	}
	changed, err := Write(dir, files)
	if err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
	if len(changed) != 0 {
		t.Errorf("failed Write reports %q changed", changed)
	}
	checkDir(t, dir, wantContents(old))
}

// asNobodyEnv marks this test binary run again as nobody.
const asNobodyEnv = "USDT_TEST_AS_NOBODY"

// TestWriteReadOnlyDir checks that a directory that cannot be written to
// gives an error and keeps what it had, with no temporary files. Root
// may write to any directory: as root (CI runs so), the test runs again
// in a copy of this test binary as nobody (setpriv), and must pass there.
func TestWriteReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 && os.Getenv(asNobodyEnv) == "" {
		runAsNobody(t, "TestWriteReadOnlyDir")
		return
	}
	dir := t.TempDir()
	old := []File{{"a_usdt_cgo.go", []byte("old\n")}, {"a_usdt_other.go", []byte("same\n")}}
	if _, err := Write(dir, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if f, err := os.CreateTemp(dir, "probe"); err == nil {
		f.Close()
		os.Remove(f.Name())
		t.Skip("a read-only directory is writable here (running as root?)")
	}

	// Unchanged files need no write at all.
	if changed, err := Write(dir, old); err != nil || len(changed) != 0 {
		t.Errorf("Write of unchanged files into a read-only directory = %q, %v; want nothing, no error", changed, err)
	}

	changed, err := Write(dir, []File{{"a_usdt_cgo.go", []byte("new\n")}, {"a_usdt_other.go", []byte("same\n")}})
	if err == nil || !os.IsPermission(err) {
		t.Errorf("Write into a read-only directory: err = %v, want a permission error", err)
	}
	if len(changed) != 0 {
		t.Errorf("failed Write reports %q changed", changed)
	}
	checkDir(t, dir, wantContents(old))
}

// TestWriteRenameFailure makes the last rename fail (its destination is a
// directory): every file renamed before is reported, and no temporary file
// stays behind.
func TestWriteRenameFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "b.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.go", "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := Write(dir, []File{{"a.go", []byte("a\n")}, {"b.go", []byte("b\n")}})
	if err == nil {
		t.Fatal("renaming over a non-empty directory succeeded")
	}
	if want := []string{"a.go"}; !slices.Equal(changed, want) {
		t.Errorf("changed = %q, want %q", changed, want)
	}
	got := dirContents2(t, dir)
	if want := []string{"a.go", "b.go"}; !slices.Equal(got, want) {
		t.Errorf("directory holds %q, want %q", got, want)
	}
}

// dirContents2 lists dir's entries, directories included.
func dirContents2(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestPackageName(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // "" for an error
	}{
		{"one file", map[string]string{"a.go": "package shop\n"}, "shop"},
		{"doc comment and build tag", map[string]string{"a.go": "//go:build linux\n\n// Package shop sells.\npackage shop\n"}, "shop"},
		{"tests ignored", map[string]string{"a_test.go": "package shop_test\n", "b.go": "package shop\n"}, "shop"},
		{"only tests", map[string]string{"a_test.go": "package shop\n"}, ""},
		{"stale generated files ignored", map[string]string{
			"a_usdt_cgo.go": "package old\n", "a_usdt_other.go": "package old\n", "z.go": "package shop\n",
		}, "shop"},
		{"only generated files", map[string]string{"a_usdt_cgo.go": "package old\n"}, ""},
		{"unparsable file skipped", map[string]string{"a.go": "packag shop\n", "b.go": "package shop\n"}, "shop"},
		{"ignored generator skipped", map[string]string{
			"gen.go": "//go:build ignore\n\npackage main\n", "shop.go": "package shop\n",
		}, "shop"},
		{"only an ignored file", map[string]string{"gen.go": "//go:build ignore\n\npackage main\n"}, "main"},
		{"other files ignored", map[string]string{"a.c": "int x;\n", "go.mod": "module m\n", "b.go": "package shop\n"}, "shop"},
		{"empty directory", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, src := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := PackageName(dir)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("PackageName = %q, want an error", got)
				}
				if !strings.Contains(err.Error(), "no Go files in "+dir) || !strings.Contains(err.Error(), "hint: pass -pkg NAME") {
					t.Errorf("error %q does not name the directory and the -pkg hint", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("PackageName = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// runAsNobody runs the test named test in a copy of this test binary as
// the user nobody, and fails unless it passes there.
func runAsNobody(t *testing.T, test string) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		tracetest.SkipMissing(t, "setpriv (util-linux) is not installed: cannot run %s as nobody, and root writes anywhere", test)
	}
	dir := tracetest.NobodyDir(t)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "usdtgen.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin, "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asNobodyEnv+"=1", "TMPDIR="+os.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as nobody: %v\n%s", test, err, out)
	}
}
