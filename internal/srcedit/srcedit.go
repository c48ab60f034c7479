// Package srcedit applies edits at byte offsets to Go source, and makes
// the edited copy of a file that the compiler reads as the original: its
// positions, in messages and export data, stay the file's.
package srcedit

import (
	"cmp"
	"path/filepath"
	"slices"
)

// Edit deletes Del bytes at At, an offset of the original, and inserts
// Text there.
type Edit struct {
	At, Del int
	Text    string
}

// Apply returns a copy of src with edits applied; of two insertions at
// one offset, the one listed first reads first. Deletions overlap no
// other edit. The copy is made in one pass: a package of thousands of
// functions has tens of thousands of edits.
func Apply(src []byte, edits []Edit) []byte {
	sorted := slices.Clone(edits)
	slices.SortStableFunc(sorted, func(a, b Edit) int { return cmp.Compare(a.At, b.At) })
	size := len(src)
	for _, e := range sorted {
		size += len(e.Text) - e.Del
	}
	out := make([]byte, 0, size)
	done := 0
	for _, e := range sorted {
		out = append(append(out, src[done:e.At]...), e.Text...)
		done = e.At + e.Del
	}
	return append(out, src[done:]...)
}

// Copy returns the path in dir of the edited copy of the file at path,
// its base name after prefix, and its source: src with edits applied,
// after a line directive that gives it the positions of the file.
func Copy(dir, prefix, path string, src []byte, edits []Edit) (string, []byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	// The directive must start in column 1 and names the next line and
	// column: without a column, every later position of the file would
	// have column 0 (unknown) in compiler messages and export data.
	out := append([]byte("//line "+abs+":1:1\n"), Apply(src, edits)...)
	return filepath.Join(dir, prefix+filepath.Base(path)), out, nil
}
