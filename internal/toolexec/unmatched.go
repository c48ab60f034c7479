package toolexec

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-usdt/usdt/internal/goarchive"
	"github.com/go-usdt/usdt/internal/gomod"
	"github.com/go-usdt/usdt/rewrite"
	"github.com/go-usdt/usdt/rules"
)

// A rule that selects no function is almost always a mistake (a typo in
// its package, package: "main", a func glob that names nothing), and the
// build succeeds all the same, without the probes. Saying so needs every
// package of the build, and the wrapper runs once per tool: a compile sees
// one package, and the go command runs none for a package it has cached.
//
// So each compile of a package that a rule selects functions of records
// which rules did, in a member of the package archive (ruleUseMember),
// where the build cache keeps it with the package: a cached package still
// tells. The link step, which reads every archive of the executable
// anyway, joins them and warns about the rules no package selected from.
// The archive's cache key holds the rules' hash (the tool identity), so
// a record always speaks of the rules the link has; it names them by
// their hash too, and a record of other rules is ignored. The linker skips
// the member: its name has no .o suffix (cmd/link's rule for the members
// build tools add), so executables stay as they were. go tool nm and
// objdump, which know only the go command's own such members by name,
// refuse the package archive (not the executable) for it.
//
// The unit is the executable, the one step that sees a whole program, and
// the one the probes are for:
//   - go build ./... of a library links nothing, and warns about nothing:
//     there is no program to miss probes in. A compile cannot tell, as
//     another package of the build may be the one a rule is for.
//   - go test links a test binary per package, which a rule for another
//     package of the module matches nothing of; go build ./... of several
//     commands likewise. A rule whose package is not in the binary is
//     therefore a warning only when its pattern names no package that
//     exists for the build (buildTree): otherwise it belongs to another
//     binary, and only -v mentions it.
//   - When the go command finds the executable up to date it runs no link,
//     and shows the last one's output, warnings included, from its cache.

// ruleUseMember names the archive member holding a compile's rule record:
// "usdt-rules HASH INDEX...\n", the Rule.Index of each rule that selected a
// function of the package, for the rules file of SHA-256 HASH.
const ruleUseMember = "usdt_rules"

// recordRuleUse adds the compile's rule record to the package archive,
// after the compile: rewrite.Package asked the rules for every function of
// the package (rules.Rules.Match, which counts each rule it returns), and
// this process compiles that package only.
func (inv Invocation) recordRuleUse() error {
	if inv.Rules == nil {
		return nil
	}
	selected := inv.Rules.Selected()
	out := flagValue(inv.Args, "o")
	if len(selected) == 0 || out == "" || !slices.Contains(inv.Args, "-pack") {
		return nil
	}
	b := fmt.Appendf(nil, "usdt-rules %s", inv.Rules.Hash)
	for _, i := range selected {
		b = fmt.Appendf(b, " %d", i)
	}
	return appendMember(out, ruleUseMember, append(b, '\n'))
}

// selectedRules returns the indexes of the rules of r that the archives
// at paths record as selecting functions, sorted.
func selectedRules(r *rules.Rules, paths []string) []int {
	set := map[int]bool{}
	for _, path := range paths {
		for _, rec := range goarchive.Members(path, func(name string) bool { return name == ruleUseMember }) {
			fields := strings.Fields(string(rec))
			if len(fields) < 2 || fields[0] != "usdt-rules" || fields[1] != r.Hash {
				continue
			}
			for _, f := range fields[2:] {
				if i, err := strconv.Atoi(f); err == nil {
					set[i] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// warnUnmatched prints, after a link, a warning for each rule that selected
// no function of the executable, and with -v a note for each rule that
// may be another binary's. packagefile is the link's import configuration
// (import path to archive), selected what the archives recorded. It never
// fails the link: the executable is good, and the rules may be meant so.
func (inv Invocation) warnUnmatched(packagefile map[string]string, selected []int) {
	defer func() {
		// A bug here must not fail a build that succeeded.
		if p := recover(); p != nil {
			fmt.Fprintf(inv.Stderr, "usdt-toolexec: internal error while checking the rules, ignored: %v\n", p)
		}
	}()
	// Without the import configuration every rule would seem to name
	// nothing.
	if inv.Rules == nil || len(selected) == len(inv.Rules.Rules) || len(packagefile) == 0 {
		return
	}
	// The go command passes the main package's archive last.
	main := ""
	if n := len(inv.Args); n > 0 {
		for path, file := range packagefile {
			if file == inv.Args[n-1] {
				main = path
			}
		}
	}
	var tree *buildTree
	warnings, notes := inv.Rules.Unmatched(selected, rules.Binary{
		Packages: slices.Sorted(maps.Keys(packagefile)),
		Main:     main,
		Never:    rewrite.Excluded,
		Elsewhere: func(pattern string) bool {
			if tree == nil {
				tree = newBuildTree(inv.goroot(), goCommandDir())
			}
			return tree.mayHold(pattern)
		},
	})
	for _, w := range warnings {
		fmt.Fprintf(inv.Stderr, "usdt-toolexec: warning: %s\n", w)
	}
	if inv.Verbose {
		for _, n := range notes {
			fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s\n", n)
		}
	}
}

// goroot is the GOROOT of the tool run: the tool is
// $GOROOT/pkg/tool/GOOS_GOARCH/NAME.
func (inv Invocation) goroot() string {
	return filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(inv.Tool))))
}

// buildTree is what the file system says of the packages a build may
// link: those of the standard library, of the main modules (the go.mod
// above the go command's directory, or each module a go.work uses) and,
// by path only, of the modules they require.
type buildTree struct {
	goroot   string
	mains    map[string]string // module path -> directory
	requires []string
}

func newBuildTree(goroot, dir string) *buildTree {
	t := &buildTree{goroot: goroot, mains: map[string]string{}}
	if os.Getenv("GO111MODULE") == "off" {
		return t
	}
	var roots []string
	switch work := os.Getenv("GOWORK"); {
	case work == "off":
	case work != "":
		roots = gomod.Uses(work)
	default:
		if root := gomod.Root(dir, "go.work"); root != "" {
			roots = gomod.Uses(filepath.Join(root, "go.work"))
		}
	}
	if len(roots) == 0 {
		roots = []string{gomod.Root(dir, "go.mod")}
	}
	for _, root := range roots {
		if root == "" {
			continue
		}
		if path := gomod.ImportPath(root); path != "" {
			t.mains[path] = root
		}
		t.requires = append(t.requires, gomod.Requires(filepath.Join(root, "go.mod"))...)
	}
	return t
}

// mayHold reports whether a package pattern may name a package of the
// build. Below a main module or in the standard library it must name a
// directory that holds Go files, or for a pattern with "...", the
// directory where its "..." starts; a required module is taken at its
// path: finding its directory would mean redoing the go command's module
// loading (versions, replacements, vendoring), and a typo below it is
// rarer than one of the module itself.
func (t *buildTree) mayHold(pattern string) bool {
	elems := strings.Split(pattern, "/")
	wild := slices.Index(elems, "...")
	if wild == 0 {
		return true // ".../x" may be anywhere
	}
	prefix := pattern
	if wild > 0 {
		prefix = strings.Join(elems[:wild], "/")
	}
	for _, mod := range t.requires {
		if within(prefix, mod) || wild > 0 && within(mod, prefix) {
			return true
		}
	}
	for mod, dir := range t.mains {
		if within(prefix, mod) {
			return holdsPackages(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(prefix[len(mod):], "/"))), wild > 0)
		}
		if wild > 0 && within(mod, prefix) {
			return true
		}
	}
	if !strings.Contains(elems[0], ".") {
		return holdsPackages(filepath.Join(t.goroot, "src", filepath.FromSlash(prefix)), wild > 0)
	}
	return false
}

// within reports whether the import path p is path or below it.
func within(p, path string) bool {
	return p == path || strings.HasPrefix(p, path+"/")
}

// holdsPackages reports whether dir is a package's directory (it has Go
// files) or, for a pattern with "...", a directory at all.
func holdsPackages(dir string, wild bool) bool {
	if wild {
		fi, err := os.Stat(dir)
		return err == nil && fi.IsDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
			return true
		}
	}
	return false
}
