package rules

import (
	"fmt"
	"path"
	"strings"
)

// funcGlob is a compiled func or exclude glob. The glob is split at its "."
// once, here, so that matching never has to decide whether a wildcard may
// cross from the type name into the method name: it cannot.
type funcGlob struct {
	all    bool   // the glob "*": every function and method
	method bool   // "Type.Method" form; recv and name are the two sides
	recv   string // glob on the receiver type name (methods only)
	name   string // glob on the function or method name
}

// problem is a validation failure before it gets a position.
type problem struct{ msg, hint string }

const globHint = `globs use path.Match syntax: * any characters, ? one character, [a-z] a class, \ escapes`

// parseFuncGlob validates and compiles one func or exclude glob.
func parseFuncGlob(s string) (funcGlob, *problem) {
	switch {
	case s == "*":
		return funcGlob{all: true}, nil
	case s == "":
		return funcGlob{}, &problem{"empty glob", `use "*" for every function and method`}
	case strings.ContainsAny(s, " \t\r\n"):
		return funcGlob{}, &problem{fmt.Sprintf("glob %q contains a blank", s), "Go names have no blanks; list several globs as separate elements"}
	case strings.ContainsAny(s, "()"):
		return funcGlob{}, &problem{fmt.Sprintf("glob %q contains parentheses", s),
			`write methods as "Type.Method", without parentheses or "*", whatever the receiver`}
	case strings.Contains(s, "/"):
		return funcGlob{}, &problem{fmt.Sprintf("glob %q contains \"/\"", s), "func globs match names only; put the import path in package:"}
	}
	recv, name, isMethod := strings.Cut(s, ".")
	if isMethod && strings.Contains(name, ".") {
		return funcGlob{}, &problem{fmt.Sprintf("glob %q has more than one \".\"", s), `names are "Func" or "Type.Method"`}
	}
	if isMethod && (recv == "" || name == "") {
		return funcGlob{}, &problem{fmt.Sprintf("glob %q has an empty side of its \".\"", s), `write "*.Method" for a method of any type, "Type.*" for every method of a type`}
	}
	for _, part := range []string{recv, name} {
		// path.Match reports ErrBadPattern for any malformed pattern, even
		// when the name does not match.
		if _, err := path.Match(part, ""); err != nil {
			return funcGlob{}, &problem{fmt.Sprintf("bad glob %q: %v", s, err), globHint}
		}
	}
	if !isMethod {
		return funcGlob{name: s}, nil
	}
	return funcGlob{method: true, recv: recv, name: name}, nil
}

// match reports whether g matches a function (isMethod false, recv empty)
// or a method recv.name. The globs are valid, so errors cannot occur.
func (g *funcGlob) match(recv, name string, isMethod bool) bool {
	if g.all {
		return true
	}
	if g.method != isMethod {
		return false
	}
	if isMethod {
		if ok, _ := path.Match(g.recv, recv); !ok {
			return false
		}
	}
	ok, _ := path.Match(g.name, name)
	return ok
}

// splitFuncName turns the name Match is given into receiver type and name.
// Besides the documented "Func" and "Type.Method" it accepts the spellings a
// caller holding a go/ast or go/types object may produce, "(*Type).Method",
// "*Type.Method" and "Type[K, V].Method", so that a stray "*" or type
// parameter list does not silently make a rule miss.
func splitFuncName(fn string) (recv, name string, isMethod bool) {
	// A generic function's name may come with its type parameters, which
	// may themselves contain "." (Map[pkg.K]): drop them first.
	if strings.HasSuffix(fn, "]") {
		if j := strings.IndexByte(fn, '['); j > 0 {
			fn = fn[:j]
		}
	}
	i := strings.LastIndexByte(fn, '.')
	if i < 0 {
		return "", fn, false
	}
	recv, name = fn[:i], fn[i+1:]
	recv = strings.TrimPrefix(recv, "(")
	recv = strings.TrimSuffix(recv, ")")
	recv = strings.TrimPrefix(recv, "*")
	if j := strings.IndexByte(recv, '['); j >= 0 {
		recv = recv[:j]
	}
	return recv, name, true
}

// pkgPattern is a compiled package pattern: its path elements, where "..."
// stands for any number of elements.
type pkgPattern struct {
	elems []string
	any   bool // the pattern "...", which needs no work at all
}

const pkgHint = `write an import path, with "..." as a whole path element for "this and everything below", e.g. "example.com/shop/..."`

// parsePkgPattern validates and compiles a package pattern.
func parsePkgPattern(s string) (pkgPattern, *problem) {
	bad := func(msg string, hint string) (pkgPattern, *problem) {
		return pkgPattern{}, &problem{fmt.Sprintf("bad package pattern %q: %s", s, msg), hint}
	}
	switch {
	case s == "":
		return bad("empty", pkgHint)
	case strings.ContainsAny(s, " \t\r\n"):
		return bad("contains a blank", "import paths have no blanks; write one pattern per rule")
	case strings.HasPrefix(s, "/"):
		return bad(`starts with "/"`, "write an import path such as example.com/shop, not a directory")
	case strings.HasSuffix(s, "/"):
		return bad(`ends with "/"`, `drop the "/", or end with "/..." to include the packages below`)
	case strings.ContainsAny(s, `*?[]\`):
		return bad("contains glob characters", `package patterns use "..." for "any packages", e.g. "example.com/shop/..."`)
	}
	elems := strings.Split(s, "/")
	for _, e := range elems {
		switch {
		case e == "":
			return bad(`has an empty path element ("//")`, pkgHint)
		case e == "." || e == "..":
			return bad("is relative", "use the full import path, e.g. example.com/shop/..., not a directory path")
		case e != "..." && strings.Contains(e, "..."):
			return bad(`has "..." inside a path element`,
				`"..." must be a whole path element: "example.com/shop/..." matches example.com/shop and the packages below it`)
		}
	}
	return pkgPattern{elems: elems, any: s == "..."}, nil
}

// match reports whether the pattern matches importPath. "..." elements are
// matched like "*" in a classic wildcard matcher, over path elements instead
// of characters: remember the last "..." seen and, on a mismatch, let it
// absorb one more element. That is linear per "..." rather than exponential.
func (p *pkgPattern) match(importPath string) bool {
	if p.any {
		return true
	}
	if importPath == "" {
		return false
	}
	elems := strings.Split(importPath, "/")
	pi, ei := 0, 0
	star, mark := -1, 0 // last "..." in the pattern, and where it started absorbing
	for ei < len(elems) {
		switch {
		case pi < len(p.elems) && p.elems[pi] == "...":
			star, mark = pi, ei
			pi++
		case pi < len(p.elems) && p.elems[pi] == elems[ei]:
			pi++
			ei++
		case star >= 0:
			mark++
			pi, ei = star+1, mark
		default:
			return false
		}
	}
	for pi < len(p.elems) && p.elems[pi] == "..." {
		pi++
	}
	return pi == len(p.elems)
}
