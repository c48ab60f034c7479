package rules

import (
	"errors"
	"github.com/go-usdt/usdt/internal/diag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and keeps its promises: either
// valid rules or a non-empty, positioned ErrorList.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(shopRules))
	f.Add([]byte("rules: [{package: &p a, func: *p}, *x]"))
	f.Add([]byte("rules: [{package: a, exclude: &e [x]}, {package: b, exclude: *e}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := Parse("f.yml", data)
		if err != nil {
			if rs != nil {
				t.Fatalf("both rules and an error")
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 || len(list) > diag.MaxErrors+1 {
				t.Fatalf("error %T %v", err, err)
			}
			for _, e := range list {
				if e.Pos.File != "f.yml" || e.Pos.Line < 1 || e.Msg == "" {
					t.Fatalf("bad error %#v", e)
				}
			}
			return
		}
		if len(rs.Rules) == 0 || rs.Provider == "" || len(rs.Hash) != 64 {
			t.Fatalf("valid rules without content: %+v", rs)
		}
		for i, r := range rs.Rules {
			if r.Index != i || r.Pos.Line < 1 || (!r.Entry && !r.Exit) {
				t.Fatalf("rule %d: %+v", i, r)
			}
			if _, p := parsePkgPattern(r.Package); p != nil {
				t.Fatalf("rule %d: accepted bad package %q", i, r.Package)
			}
			// Whatever was accepted must be usable.
			pkg := strings.ReplaceAll(r.Package, "...", "x")
			rs.MatchPackage(pkg)
			rs.Match(pkg, r.Func)
			rs.Match(pkg, "T.M")
			rs.Match(pkg, "(*T[K]).M")
		}
		rs.Unused()
	})
}
