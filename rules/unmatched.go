package rules

import (
	"fmt"
	"strings"
)

// Selected returns the Rule.Index of each rule that Match has returned so
// far, in file order: in a compile, the rules that selected a function of
// the package.
func (r *Rules) Selected() []int {
	m := r.compile()
	var selected []int
	for i := range m.rules {
		if m.rules[i].hit.Load() {
			selected = append(selected, m.rules[i].rule.Index)
		}
	}
	return selected
}

// Binary is what the link of one executable knows of its build, for
// Unmatched.
type Binary struct {
	// Packages are the import paths of the packages it links.
	Packages []string
	// Main is the import path of its main package: "command-line-arguments"
	// for files named on the go command line, "example.com/p.test" for the
	// test binary of example.com/p; "" when not known.
	Main string
	// Never reports the packages that are never instrumented.
	Never func(importPath string) bool
	// Elsewhere reports whether a package pattern that matches none of
	// Packages may still name packages of the build that this executable
	// does not link: another command's of `go build ./...`, another
	// package's test of `go test ./...`.
	Elsewhere func(pattern string) bool
}

// Unmatched explains the rules that selected no function of a binary, from
// the indexes of those that did (selected). Warnings are the rules that
// look wrong: their package pattern names no package (a typo, or "main"),
// or their func and exclude globs select no function of the packages it
// names. Notes are the rules whose package pattern matches no package of
// this binary but may name packages elsewhere in the build: other
// binaries' rules, for -v only.
func (r *Rules) Unmatched(selected []int, b Binary) (warnings, notes []*Error) {
	hit := map[int]bool{}
	for _, i := range selected {
		hit[i] = true
	}
	m := r.compile()
	for i := range m.rules {
		c := &m.rules[i]
		if hit[c.rule.Index] || c.invalid {
			continue
		}
		var matched, never []string
		for _, p := range b.Packages {
			switch {
			case !c.pkg.match(p):
			case b.Never != nil && b.Never(p):
				never = append(never, p)
			default:
				matched = append(matched, p)
			}
		}
		rule := c.rule
		e := &Error{Pos: rule.Pos}
		switch {
		case len(matched) > 0:
			e.Msg = fmt.Sprintf("rule %d selects no function: func %q%s matches no function of %s",
				rule.Index+1, rule.Func, excludeClause(rule.Exclude), listPackages(matched))
			e.Hint = `func globs match "Func" and "Type.Method", the receiver without "*" or type parameters; ` +
				"a function goes to the first rule that selects it, so an earlier rule may have taken them"
		case len(never) > 0:
			e.Msg = fmt.Sprintf("rule %d selects no function: package %q matches only packages that are never instrumented (%s)",
				rule.Index+1, rule.Package, listPackages(never))
			e.Hint = "the runtime and the packages it is built from run where a probe cannot: remove the rule"
		case rule.Package == "main":
			e.Msg = fmt.Sprintf(`rule %d selects no function: package "main" names no package`, rule.Index+1)
			e.Hint = mainHint(b.Main)
		case b.Elsewhere != nil && b.Elsewhere(rule.Package):
			e.Msg = fmt.Sprintf("rule %d selects no function in this binary, which links no package %q matches",
				rule.Index+1, rule.Package)
			notes = append(notes, e)
			continue
		default:
			e.Msg = fmt.Sprintf("rule %d selects no function: package %q matches no package of this build", rule.Index+1, rule.Package)
			e.Hint = "write an import path as go list prints it: go list -deps . lists the packages a build links"
			if s := closestPath(rule.Package, b.Packages); s != "" {
				e.Hint = fmt.Sprintf("did you mean %q?", s)
			}
		}
		warnings = append(warnings, e)
	}
	return warnings, notes
}

func excludeClause(exclude []string) string {
	if len(exclude) == 0 {
		return ""
	}
	q := make([]string, len(exclude))
	for i, x := range exclude {
		q[i] = fmt.Sprintf("%q", x)
	}
	return " with exclude [" + strings.Join(q, ", ") + "]"
}

// listPackages names a few packages: a pattern such as "..." matches
// hundreds.
func listPackages(pkgs []string) string {
	const most = 3
	if len(pkgs) <= most {
		return strings.Join(pkgs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pkgs[:most], ", "), len(pkgs)-most)
}

// mainHint says how to name the main package of the binary whose own is
// main: the compiler knows every main package as "main", and a user who
// reads `package main` at the top of the file writes that.
func mainHint(main string) string {
	switch {
	case main == "command-line-arguments":
		return `this binary was built from files named on the go command line, whose package is "command-line-arguments" to go list: write package: "command-line-arguments"`
	case main != "" && !strings.HasSuffix(main, ".test"):
		return fmt.Sprintf(`rules name a main package by its import path, as go list prints it (the module's path for one at the module's root): package: %q for this binary's`, main)
	}
	return `rules name a main package by its import path, as go list prints it: the module's path for one at the module's root, "command-line-arguments" for files named on the go command line`
}

// closestPath returns the import path of pkgs closest to a package pattern
// that matched none of them, or "" when none is close enough to be the one
// meant: a typo, such as go.etcd.io/bolt for go.etcd.io/bbolt, is a few
// edits away. A pattern ending in "/..." is compared without that
// suffix, and suggested with it; one with "..." elsewhere is not compared.
func closestPath(pattern string, pkgs []string) string {
	base, wild := strings.CutSuffix(pattern, "/...")
	if strings.Contains(base, "...") {
		return ""
	}
	best, bestD := "", len(base)/3+1 // closer than a third of the path
	for _, p := range pkgs {
		if d := editDistance(base, p); d < bestD {
			best, bestD = p, d
		}
	}
	if best != "" && wild {
		best += "/..."
	}
	return best
}
