package rules

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden with the current errors")

// TestBadFiles checks the exact error text for every file in testdata/bad:
// the messages and hints are the user interface of this package.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d bad files", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := Parse(filepath.ToSlash(file), data)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", rs)
			}
			checkErrorList(t, file, err)
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// checkErrorList checks what every Parse error promises: an ErrorList of
// positioned *Errors, in order, reachable with errors.As.
func checkErrorList(t *testing.T, file string, err error) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error is %T, want a non-empty ErrorList", err)
	}
	var first *Error
	if !errors.As(err, &first) || first != list[0] {
		t.Errorf("errors.As(*Error) does not find the first error")
	}
	for i, e := range list {
		if e.Pos.File != file || e.Pos.Line < 1 || e.Msg == "" {
			t.Errorf("error %d badly positioned: %#v", i, e)
		}
		if i > 0 && (e.Pos.Line < list[i-1].Pos.Line || e.Pos.Line == list[i-1].Pos.Line && e.Pos.Col < list[i-1].Pos.Col) {
			t.Errorf("errors out of order: %v before %v", list[i-1].Pos, e.Pos)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	rs, err := Parse("usdt.yml", []byte(`rules: [{package: example.com/shop}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := Rule{Index: 0, Pos: Pos{File: "usdt.yml", Line: 1, Col: 9}, Package: "example.com/shop", Func: "*", Entry: true, Exit: true, Args: true}
	if rs.Provider != "go" || len(rs.Rules) != 1 || !equalRule(rs.Rules[0], want) {
		t.Errorf("got provider %q rules %+v, want go and %+v", rs.Provider, rs.Rules, want)
	}
	if rs.File != "usdt.yml" {
		t.Errorf("File = %q", rs.File)
	}
}

func TestParseFull(t *testing.T) {
	src := `# every key, and an alias
provider: shop
common: &common ["*.String", "init"]
rules:
  - package: "example.com/shop/..."
    func: "Handle*"
    exclude: ["HandleDebug"]
    probes: [exit]
    args: false
    unwind: true
  - package: example.com/cart
    exclude: *common
    probes: [exit, entry]
    args: True
    inline: keep
  - package: example.com/tree
    sites: notes
  - package: example.com/cache
    sites: switch
    unwind: true
    attributes:
      cache.key: "key"
    context: "parent"
`
	_, err := Parse("f.yml", []byte(src))
	// "common" is not a key: anchors must hang off a valid key.
	if err == nil || !strings.Contains(err.Error(), `f.yml:3:1: unknown key "common"`) {
		t.Fatalf("want unknown key error for common, got %v", err)
	}
	src = strings.Replace(src, "common: &common [\"*.String\", \"init\"]\n", "", 1)
	src = strings.Replace(src, `exclude: ["HandleDebug"]`, `exclude: &common ["HandleDebug", "*.String", "init"]`, 1)
	rs, err := Parse("f.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Index: 0, Pos: Pos{File: "f.yml", Line: 4, Col: 5}, Package: "example.com/shop/...", Func: "Handle*",
			Exclude: []string{"HandleDebug", "*.String", "init"}, Entry: false, Exit: true, Args: false, Unwind: true},
		{Index: 1, Pos: Pos{File: "f.yml", Line: 10, Col: 5}, Package: "example.com/cart", Func: "*",
			Exclude: []string{"HandleDebug", "*.String", "init"}, Entry: true, Exit: true, Args: true, KeepInlined: true},
		{Index: 2, Pos: Pos{File: "f.yml", Line: 15, Col: 5}, Package: "example.com/tree", Func: "*", Entry: true, Exit: true, Args: true, Notes: true},
		// sites: switch allows what sites: code does: its copy is code.
		{Index: 3, Pos: Pos{File: "f.yml", Line: 17, Col: 5}, Package: "example.com/cache", Func: "*", Entry: true, Exit: true, Args: true, Unwind: true, Switch: true},
	}
	if rs.Provider != "shop" || len(rs.Rules) != len(want) {
		t.Fatalf("got %+v", rs)
	}
	for i := range want {
		if !equalRule(rs.Rules[i], want[i]) {
			t.Errorf("rule %d:\ngot  %+v\nwant %+v", i, rs.Rules[i], want[i])
		}
	}
}

func equalRule(a, b Rule) bool {
	return a.Index == b.Index && a.Pos == b.Pos && a.Package == b.Package && a.Func == b.Func &&
		strings.Join(a.Exclude, "\x00") == strings.Join(b.Exclude, "\x00") &&
		a.Entry == b.Entry && a.Exit == b.Exit && a.Args == b.Args && a.Unwind == b.Unwind && a.KeepInlined == b.KeepInlined && a.Notes == b.Notes && a.Switch == b.Switch
}

func TestParseHash(t *testing.T) {
	a := []byte("rules: [{package: a}]\n")
	b := []byte("rules: [{package: a}] \n")
	ra, err := Parse("x", a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Parse("x", b)
	if err != nil {
		t.Fatal(err)
	}
	// Computed with: printf 'rules: [{package: a}]\n' | sha256sum
	const want = "f96ce874de94644524f5212c09df9b8374ff2ec99abb4c1a64809a7440b176f9"
	if ra.Hash != want {
		t.Errorf("Hash = %s, want %s", ra.Hash, want)
	}
	// A change the rules do not see still changes the hash: the cache key
	// must follow the bytes, not our reading of them.
	if rb.Hash == ra.Hash {
		t.Errorf("trailing blank did not change the hash")
	}
}

func TestLoad(t *testing.T) {
	rs, err := Load("testdata/good/shop.yml")
	if err != nil {
		t.Fatal(err)
	}
	if rs.File != "testdata/good/shop.yml" || rs.Provider != "shop" || len(rs.Rules) == 0 {
		t.Errorf("got %+v", rs)
	}
	if _, err := Load("testdata/good/missing.yml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want ErrNotExist", err)
	}
}

// TestGoodFiles parses every file in testdata/good: they double as examples.
func TestGoodFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yml")
	if len(files) == 0 {
		t.Fatal("no good files")
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestParseErrors covers errors that are awkward to keep as files, and the
// exact positions of some that are.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"bom only", "\ufeff", "x.yml:1:1: rules file is empty"},
		{"document marker only", "---\n", "x.yml:2:1: rules file is empty"},
		{"scalar file", "hello\n", `x.yml:1:1: rules file is the string "hello", want a mapping`},
		{"non-string key", "rules: [{package: a, 12: b}]", `x.yml:1:22: key must be a name, not the number 12`},
		{"complex key", "? [a]\n: b\n", `x.yml:1:3: key must be a name, not a list`},
		{"null in exclude", "rules: [{package: a, exclude: [~]}]", "x.yml:1:32: each exclude glob must be a string, not an empty value"},
		{"tagged value", "rules: [{package: !!binary YQ==}]", "x.yml:1:19: package must be a string, not a !!binary value"},
		{"float args", "rules: [{package: a, args: 1.5}]", "x.yml:1:28: args must be true or false, not the number 1.5"},
		{"alias to list as package", "rules: [{package: a, exclude: &l [x]}, {package: *l}]", "x.yml:1:50: package must be a string, not a list"},
		{"tab after dash", "rules:\n  -\tpackage: a\n", "x.yml:2:4: invalid YAML: found character that cannot start any token\n\thint: indent with spaces"},
		{"tab before comment", "rules: [{package: a}]\t# all of a\n", ""},
		{"deep nesting", strings.Repeat("[", 20000), "x.yml:1: invalid YAML: exceeded max depth of 10000"},
		{"flow rule missing package", "rules: [{}]", "x.yml:1:9: rule 1 has no package"},
		{"long string value", "rules: [{package: a, func: [" + strings.Repeat("x", 100) + "]}]",
			`x.yml:1:28: func must be a string, not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("x.yml", []byte(tt.src))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			checkErrorList(t, "x.yml", err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got  %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{Pos: Pos{File: "a.yml", Line: 3, Col: 7}, Msg: "m"}, "a.yml:3:7: m"},
		{Error{Pos: Pos{File: "a.yml", Line: 3, Col: 7}, Msg: "m", Hint: "h"}, "a.yml:3:7: m\n\thint: h"},
		{Error{Pos: Pos{File: "a.yml", Line: 3, Col: 0}, Msg: "m"}, "a.yml:3: m"},
		{Error{Pos: Pos{File: "", Line: 3, Col: 7}, Msg: "m"}, "3:7: m"},
		{Error{Pos: Pos{File: "a.yml", Line: 0, Col: 0}, Msg: "m"}, "a.yml: m"},
		{Error{Msg: "m"}, "-: m"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct{ in, want string }{
		{"fucn", "func"},
		{"Func", "func"},
		{"packge", "package"},
		{"pkg", "package"},
		{"arg", "args"},
		{"probe", "probes"},
		{"excludes", "exclude"},
		{"color", ""},
		{strings.Repeat("x", 1000), ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.in, ruleKeys); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
