package rules

import (
	"fmt"
	"strings"
	"testing"
)

func TestSelected(t *testing.T) {
	rs := mustParse(t, shopRules)
	if got := rs.Selected(); len(got) != 0 {
		t.Errorf("before any Match: selected %v", got)
	}
	rs.MatchPackage("example.com/shop/cart")         // not a selection
	rs.Match("example.com/shop/cart", "Cart.String") // rule 2
	rs.Match("example.com/shop/api/v2", "HandleGet") // rule 0
	rs.Match("fmt", "Println")                       // nothing
	if got := fmt.Sprint(rs.Selected()); got != "[0 2]" {
		t.Errorf("selected %s, want [0 2]", got)
	}
}

const unmatchedRules = `
rules:
  - package: example.com/app
    func: hello
  - package: go.etcd.io/bolt
  - package: main
  - package: example.com/app/store
    func: "Put*"
    exclude: ["PutAll"]
  - package: example.com/app/tools
  - package: runtime
  - package: go.etcd.io/bolt/...
  - package: example.com/far/away
`

// TestUnmatched: each case is one rule of unmatchedRules that selected
// nothing, linked with the packages of app; the others are selected.
func TestUnmatched(t *testing.T) {
	app := []string{"example.com/app", "example.com/app/store", "go.etcd.io/bbolt", "go.etcd.io/bbolt/internal/common", "runtime", "internal/abi"}
	never := func(p string) bool { return p == "runtime" || p == "internal/abi" }
	elsewhere := func(p string) bool { return p == "example.com/app/tools" }
	tests := []struct {
		rule       int // Rule.Index
		main       string
		warn, hint string // substrings; warn "" wants no warning
		note       bool
	}{
		{rule: 0, warn: `rules.yml:3:5: rule 1 selects no function: func "hello" matches no function of example.com/app`,
			hint: `hint: func globs match "Func" and "Type.Method"`},
		{rule: 1, warn: `rules.yml:5:5: rule 2 selects no function: package "go.etcd.io/bolt" matches no package of this build`,
			hint: `hint: did you mean "go.etcd.io/bbolt"?`},
		{rule: 2, main: "example.com/app", warn: `rules.yml:6:5: rule 3 selects no function: package "main" names no package`,
			hint: `package: "example.com/app" for this binary's`},
		{rule: 2, main: "command-line-arguments", warn: `package "main" names no package`,
			hint: `write package: "command-line-arguments"`},
		{rule: 2, main: "example.com/app.test", warn: `package "main" names no package`,
			hint: `the module's path for one at the module's root, "command-line-arguments" for files named on the go command line`},
		{rule: 3, warn: `rules.yml:7:5: rule 4 selects no function: func "Put*" with exclude ["PutAll"] matches no function of example.com/app/store`},
		{rule: 4, note: true},
		{rule: 5, warn: `rule 6 selects no function: package "runtime" matches only packages that are never instrumented (runtime)`},
		{rule: 6, warn: `package "go.etcd.io/bolt/..." matches no package of this build`,
			hint: `hint: did you mean "go.etcd.io/bbolt/..."?`},
		{rule: 7, warn: `package "example.com/far/away" matches no package of this build`,
			hint: "hint: write an import path as go list prints it"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("rule%d%s", tt.rule+1, tt.main), func(t *testing.T) {
			rs, err := Parse("rules.yml", []byte(unmatchedRules))
			if err != nil {
				t.Fatal(err)
			}
			var selected []int
			for i := range rs.Rules {
				if i != tt.rule {
					selected = append(selected, i)
				}
			}
			warnings, notes := rs.Unmatched(selected, Binary{Packages: app, Main: tt.main, Never: never, Elsewhere: elsewhere})
			if tt.note {
				if len(warnings) != 0 || len(notes) != 1 || !strings.Contains(notes[0].Error(), "links no package") {
					t.Errorf("warnings %v, notes %v; want one note", warnings, notes)
				}
				return
			}
			if len(warnings) != 1 || len(notes) != 0 {
				t.Fatalf("warnings %v, notes %v; want one warning", warnings, notes)
			}
			got := warnings[0].Error()
			if !strings.Contains(got, tt.warn) || !strings.Contains(got, tt.hint) {
				t.Errorf("warning\n%s\nwant it to hold %q and %q", got, tt.warn, tt.hint)
			}
		})
	}
	t.Run("all selected", func(t *testing.T) {
		rs := mustParse(t, unmatchedRules)
		all := make([]int, len(rs.Rules))
		for i := range all {
			all[i] = i
		}
		if w, n := rs.Unmatched(all, Binary{Packages: app}); len(w)+len(n) != 0 {
			t.Errorf("warnings %v, notes %v; want none", w, n)
		}
	})
}

func TestClosestPath(t *testing.T) {
	pkgs := []string{"go.etcd.io/bbolt", "go.etcd.io/bbolt/internal/common", "fmt", "example.com/app/store"}
	tests := []struct{ pattern, want string }{
		{"go.etcd.io/bolt", "go.etcd.io/bbolt"},
		{"go.etcd.io/bolt/...", "go.etcd.io/bbolt/..."},
		{"fmtt", "fmt"},
		{"example.com/app/stor", "example.com/app/store"},
		// Nothing within a third of the path.
		{"github.com/boltdb/bolt", ""},
		{"os", ""},
		// "..." inside a pattern matches too much to compare.
		{"go.etcd.io/.../common", ""},
	}
	for _, tt := range tests {
		if got := closestPath(tt.pattern, pkgs); got != tt.want {
			t.Errorf("closestPath(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
	}
	// Import paths are longer than keys: suggest's bound is not theirs.
	long := strings.Repeat("a/", 60)
	if got := closestPath(long+"b", []string{long + "c"}); got != long+"c" {
		t.Errorf("a path of 121 bytes one edit from another: %q", got)
	}
}
