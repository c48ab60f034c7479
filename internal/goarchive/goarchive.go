// Package goarchive reads the members of the package archives the Go
// compiler writes (Unix ar format, as `go tool pack` makes them).
package goarchive

import (
	"os"
	"strconv"
	"strings"
)

// Members returns the contents of the members of the archive at path whose
// names keep says to, reading the others' headers only. A missing or
// malformed archive gives the members read before the problem: its
// readers treat a member they cannot read as one that is not there.
func Members(path string, keep func(name string) bool) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var members [][]byte
	hdr := make([]byte, 60)
	for off := int64(8); ; {
		if _, err := f.ReadAt(hdr, off); err != nil {
			return members
		}
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 {
			return members
		}
		if keep(strings.TrimRight(string(hdr[:16]), " ")) {
			b := make([]byte, size)
			if _, err := f.ReadAt(b, off+60); err != nil {
				return members
			}
			members = append(members, b)
		}
		off += 60 + size + size%2
	}
}
