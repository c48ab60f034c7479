package srcedit

import (
	"path/filepath"
	"testing"
)

// TestApply: edits apply at offsets of the original text, and of two
// insertions at one offset the one listed first reads first.
func TestApply(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		edits []Edit
		want  string
	}{
		{"none", "func f() {}", nil, "func f() {}"},
		{"insert", "func f() {}", []Edit{{At: 10, Text: "p()"}}, "func f() {p()}"},
		{"same offset in order", "ab", []Edit{{At: 1, Text: "1"}, {At: 1, Text: "2"}}, "a12b"},
		{"offsets of the original", "abcd", []Edit{{At: 3, Text: "X"}, {At: 1, Text: "Y"}}, "aYbcXd"},
		{"delete and insert", "f(int)", []Edit{{At: 2, Del: 3, Text: "a int"}}, "f(a int)"},
		{"parenthesize a result", "func f() int {", []Edit{{At: 9, Text: "("}, {At: 12, Text: ")"}}, "func f() (int) {"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Apply([]byte(tt.src), tt.edits)); got != tt.want {
				t.Errorf("Apply = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCopy: the copy is named in dir after prefix, and its directive
// names the file by its absolute path, line 1 and column 1.
func TestCopy(t *testing.T) {
	t.Chdir(t.TempDir())
	path, src, err := Copy("out", "p_", "f.go", []byte("package f\n"), []Edit{{At: 9, Text: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("f.go")
	if want := "//line " + abs + ":1:1\npackage fx\n"; path != filepath.Join("out", "p_f.go") || string(src) != want {
		t.Errorf("Copy = %q, %q; want %q, %q", path, src, filepath.Join("out", "p_f.go"), want)
	}
}
