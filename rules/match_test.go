package rules

import (
	"fmt"
	"sync"
	"testing"
)

func mustParse(t testing.TB, src string) *Rules {
	t.Helper()
	rs, err := Parse("test.yml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return rs
}

func TestFuncGlob(t *testing.T) {
	// Names are spelt as callers may pass them to Match.
	tests := []struct {
		glob string
		yes  []string
		no   []string
	}{
		{"*", []string{"F", "init", "T.M", "T.String"}, nil},
		{"Func*", []string{"Func", "FuncA"}, []string{"T.Func", "Func.M", "AFunc"}},
		{"Type.*", []string{"Type.M", "Type.String"}, []string{"Type", "TypeX.M", "T.Type"}},
		{"*.String", []string{"T.String", "Cart.String"}, []string{"String", "T.Stringer"}},
		{"*.*", []string{"T.M"}, []string{"F"}},
		{"?", []string{"F"}, []string{"FF", "T.F"}},
		{"Cart.Add", []string{"Cart.Add", "(*Cart).Add", "*Cart.Add", "Cart[T].Add", "(*Cart[K, V]).Add"}, []string{"Add", "Cart.Remove"}},
		{"*Cart.Add", []string{"Cart.Add", "MyCart.Add"}, []string{"Cart.Addx"}},
		{"[A-Z]*", []string{"Exported"}, []string{"unexported", "T.Exported"}},
		{"New\\*", []string{"New*"}, []string{"NewX"}},
		{"Map", []string{"Map", "Map[K, V]", "Map[pkg.K]"}, []string{"T.Map"}},
	}
	for _, tt := range tests {
		g, prob := parseFuncGlob(tt.glob)
		if prob != nil {
			t.Errorf("parseFuncGlob(%q): %v", tt.glob, prob.msg)
			continue
		}
		for _, name := range tt.yes {
			if recv, fn, m := splitFuncName(name); !g.match(recv, fn, m) {
				t.Errorf("%q does not match %q", tt.glob, name)
			}
		}
		for _, name := range tt.no {
			if recv, fn, m := splitFuncName(name); g.match(recv, fn, m) {
				t.Errorf("%q matches %q", tt.glob, name)
			}
		}
	}
}

func TestPkgPattern(t *testing.T) {
	tests := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"example.com/shop", []string{"example.com/shop"}, []string{"example.com/shop/cart", "example.com/shopping", "example.com"}},
		{"example.com/shop/...", []string{"example.com/shop", "example.com/shop/cart", "example.com/shop/a/b/c"},
			[]string{"example.com/shopping", "example.com", "other.com/example.com/shop"}},
		{"...", []string{"fmt", "example.com/shop", "a/b/c"}, nil},
		{".../internal/...", []string{"internal", "a/internal", "a/internal/b", "a/b/internal/c/d"}, []string{"a/internals", "a/b"}},
		{".../db", []string{"db", "a/db", "a/b/db"}, []string{"a/db/x", "adb"}},
		{"a/.../b", []string{"a/b", "a/x/b", "a/x/y/b", "a/b/b"}, []string{"a", "a/b/c", "b", "x/a/b"}},
		{"a/.../b/...", []string{"a/b", "a/x/b/y", "a/x/b/b/y"}, []string{"a/x", "a"}},
		{"a/.../.../b", []string{"a/b", "a/x/y/b"}, []string{"a/x/y"}},
	}
	for _, tt := range tests {
		p, prob := parsePkgPattern(tt.pattern)
		if prob != nil {
			t.Errorf("parsePkgPattern(%q): %v", tt.pattern, prob.msg)
			continue
		}
		for _, path := range tt.yes {
			if !p.match(path) {
				t.Errorf("%q does not match %q", tt.pattern, path)
			}
		}
		for _, path := range append(tt.no, "") {
			if p.match(path) && !p.any {
				t.Errorf("%q matches %q", tt.pattern, path)
			}
		}
	}
}

const shopRules = `
provider: shop
rules:
  - package: "example.com/shop/api/..."
    func: "Handle*"
    probes: [entry]
  - package: "example.com/shop/cart"
    exclude: ["*.String", "init", "Cart.debug*"]
  - package: "example.com/shop/..."
    func: "*.String"
    args: false
  - package: ".../internal/db"
    func: "*.*"
  - package: "example.com/never"
`

func TestMatch(t *testing.T) {
	rs := mustParse(t, shopRules)
	tests := []struct {
		pkg, fn string
		rule    int // index of the rule that matches, -1 for none
	}{
		{"example.com/shop/api", "HandleGet", 0},
		{"example.com/shop/api/v2", "HandlePost", 0},
		{"example.com/shop/api", "Server.HandleGet", -1}, // Handle* is for functions only
		{"example.com/shop/api", "serve", -1},
		{"example.com/shop/cart", "NewCart", 1},
		{"example.com/shop/cart", "Cart.Add", 1},
		{"example.com/shop/cart", "(*Cart).Add", 1}, // pointer receiver as go/types prints it
		{"example.com/shop/cart", "Cart.debugDump", -1},
		{"example.com/shop/cart", "init", -1},
		// Excluded from rule 1, so rule 2 gets it: exclude is per rule.
		{"example.com/shop/cart", "Cart.String", 2},
		{"example.com/shop/api", "Req.String", 2}, // rule 0 does not select it, rule 2 does
		{"example.com/shop", "Money.String", 2},
		{"example.com/shopping", "Money.String", -1},
		// Rule 2 covers the package but selects String methods only, so
		// the function falls through to rule 3.
		{"example.com/shop/internal/db", "Conn.Query", 3},
		{"example.com/x/internal/db", "Conn.Query", 3},
		{"example.com/x/internal/db", "Open", -1},
		{"fmt", "Println", -1},
	}
	for _, tt := range tests {
		r, ok := rs.Match(tt.pkg, tt.fn)
		got := -1
		if ok {
			got = r.Index
			if r != &rs.Rules[r.Index] {
				t.Errorf("Match returned a copy, want a pointer into Rules")
			}
		}
		if got != tt.rule {
			t.Errorf("Match(%q, %q) = rule %d, want %d", tt.pkg, tt.fn, got, tt.rule)
		}
	}
	r, _ := rs.Match("example.com/shop/api", "HandleGet")
	if !r.Entry || r.Exit || !r.Args {
		t.Errorf("rule 0 probes: %+v", r)
	}
	r, _ = rs.Match("example.com/shop", "Money.String")
	if !r.Entry || !r.Exit || r.Args {
		t.Errorf("rule 2 probes: %+v", r)
	}
}

func TestFirstRuleWins(t *testing.T) {
	rs := mustParse(t, `
rules:
  - package: "a/..."
    func: "F"
    probes: [entry]
  - package: "a"
    func: "*"
    probes: [exit]
`)
	r, ok := rs.Match("a", "F")
	if !ok || r.Index != 0 {
		t.Fatalf("Match(a, F) = %v, %v, want rule 0", r, ok)
	}
	r, ok = rs.Match("a", "G")
	if !ok || r.Index != 1 {
		t.Fatalf("Match(a, G) = %v, %v, want rule 1", r, ok)
	}
}

func TestMatchPackage(t *testing.T) {
	rs := mustParse(t, shopRules)
	for pkg, want := range map[string]bool{
		"example.com/shop":             true,
		"example.com/shop/api/v2":      true,
		"example.com/never":            true,
		"example.com/never/sub":        false,
		"a/b/internal/db":              true,
		"example.com/shopping":         false,
		"fmt":                          false,
		"":                             false,
		"example.com/shop/internal/db": true,
	} {
		if got := rs.MatchPackage(pkg); got != want {
			t.Errorf("MatchPackage(%q) = %v, want %v", pkg, got, want)
		}
	}
	// MatchPackage does not count as a hit.
	if n := len(rs.Unused()); n != len(rs.Rules) {
		t.Errorf("after MatchPackage, %d unused rules, want all %d", n, len(rs.Rules))
	}
}

func TestUnused(t *testing.T) {
	rs := mustParse(t, shopRules)
	indexes := func() []int {
		var idx []int
		for _, r := range rs.Unused() {
			idx = append(idx, r.Index)
		}
		return idx
	}
	if got := fmt.Sprint(indexes()); got != "[0 1 2 3 4]" {
		t.Errorf("before any Match: unused %s", got)
	}
	rs.Match("example.com/shop/cart", "Cart.String") // rule 2
	rs.Match("example.com/shop/cart", "init")        // nothing
	rs.Match("fmt", "Println")                       // nothing
	if got := fmt.Sprint(indexes()); got != "[0 1 3 4]" {
		t.Errorf("after matching rule 2: unused %s", got)
	}
	u := rs.Unused()
	if u[0].Pos != (Pos{File: "test.yml", Line: 4, Col: 5}) || u[0].Package != "example.com/shop/api/..." {
		t.Errorf("unused rule lost its position or fields: %+v", u[0])
	}
}

// TestConcurrentMatch is for the race detector: toolexec matches from one
// process, but the rewriter may fan out over files.
func TestConcurrentMatch(t *testing.T) {
	rs := mustParse(t, shopRules)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				rs.Match("example.com/shop/cart", fmt.Sprintf("F%d", i*j))
				rs.MatchPackage("example.com/shop")
				rs.Unused()
			}
		}()
	}
	wg.Wait()
	if got := len(rs.Unused()); got != 4 {
		t.Errorf("%d unused, want 4", got)
	}
}

// A Rules built by hand, not by Parse, compiles on first use; invalid
// patterns in it match nothing instead of panicking.
func TestHandBuiltRules(t *testing.T) {
	rs := &Rules{Provider: "go", Rules: []Rule{
		{Index: 0, Package: "a[", Func: "*"},
		{Index: 1, Package: "a", Func: "F[", Exclude: []string{"G["}},
		{Index: 2, Package: "a", Func: "*", Exclude: []string{"G[", "H"}},
	}}
	if r, ok := rs.Match("a", "G"); !ok || r.Index != 2 {
		t.Errorf("Match(a, G) = %v, %v, want rule 2", r, ok)
	}
	if _, ok := rs.Match("a", "H"); ok {
		t.Errorf("Match(a, H) matched an excluded function")
	}
	if rs.MatchPackage("a[") {
		t.Errorf("an invalid package pattern matched")
	}
	var empty Rules
	if empty.MatchPackage("a") || len(empty.Unused()) != 0 {
		t.Errorf("zero Rules matched something")
	}
	if _, ok := empty.Match("a", "F"); ok {
		t.Errorf("zero Rules matched a function")
	}
}

func BenchmarkMatch(b *testing.B) {
	rs := mustParse(b, shopRules)
	for b.Loop() {
		rs.Match("example.com/shop/cart", "(*Cart).Add")
	}
}
