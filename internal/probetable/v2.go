package probetable

import (
	"bytes"
	"strconv"

	"github.com/go-usdt/usdt/internal/probe"
)

// decodeV2 reads the strings of a version 2 table (see the package
// documentation) into probes, and reports whether they were well formed.
func decodeV2(b []byte, probes []probe.Probe) bool {
	r := strs{rest: b}
	pkg := r.next()
	for i := range probes {
		p := &probes[i]
		p.Package = pkg
		p.Provider, p.Name, p.Spec = r.next(), r.next(), r.next()
	}
	if r.marker(kindsMarker) {
		decodeKinds(&r, probes)
	}
	if r.marker(namesMarker) {
		decodeNames(&r, probes)
	}
	return !r.bad
}

// Markers start the optional parts of the strings: what follows the last
// part in an older table is padding.
const (
	kindsMarker = "kinds"
	namesMarker = "names"
)

// strs reads a table's NUL-terminated strings. Running out of them makes
// the table bad, not a panic: the bytes may be data that merely passed the
// checksum.
type strs struct {
	rest []byte
	bad  bool
}

func (r *strs) next() string {
	i := bytes.IndexByte(r.rest, 0)
	if i < 0 {
		r.bad = true
		return ""
	}
	s := string(r.rest[:i])
	r.rest = r.rest[i+1:]
	return s
}

// marker consumes the marker m if the strings continue with it.
func (r *strs) marker(m string) bool {
	rest, ok := bytes.CutPrefix(r.rest, []byte(m+"\x00"))
	if ok {
		r.rest = rest
	}
	return ok
}

// decodeKinds gives every probe one argument per kind.
func decodeKinds(r *strs, probes []probe.Probe) {
	for i := range probes {
		for _, k := range parseKinds(r.next()) {
			probes[i].Args = append(probes[i].Args, probe.Arg{Kind: k})
		}
	}
}

// decodeNames names the arguments decodeKinds made, and adds the dropped
// ones.
func decodeNames(r *strs, probes []probe.Probe) {
	for i := range probes {
		p := &probes[i]
		count, err := strconv.Atoi(r.next())
		if err != nil || count < len(p.Args) || count > maxArgs {
			r.bad = true
			return
		}
		for j := range count {
			a := probe.Arg{Name: r.next(), Type: r.next()}
			if j < len(p.Args) {
				p.Args[j].Name, p.Args[j].Type = a.Name, a.Type
			} else {
				p.Dropped = append(p.Dropped, a)
			}
		}
	}
}
