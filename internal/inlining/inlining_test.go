package inlining

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line string
		pos  Pos
		d    Decision
		ok   bool
	}{
		{"/src/p/a.go:7:6: can inline gated with cost 74 as: func(int) int { return 1 }", Pos{"a.go", 7, 6}, Decision{Name: "gated", Inlinable: true, Cost: 74}, true},
		{"./a.go:10:6: can inline (*T).Get with cost 5 as: method(*T) func(int) int { return t.x + a }", Pos{"a.go", 10, 6}, Decision{Name: "(*T).Get", Inlinable: true, Cost: 5}, true},
		{"/src/p/b.go:9:6: cannot inline big: function too complex: cost 91 exceeds budget 80", Pos{"b.go", 9, 6}, Decision{Name: "big", Cost: 91, Reason: "function too complex: cost 91 exceeds budget 80"}, true},
		{"/src/p/b.go:3:6: cannot inline f: marked go:noinline", Pos{"b.go", 3, 6}, Decision{Name: "f", Reason: "marked go:noinline"}, true},
		// A call site's decision, not a function's.
		{"/src/p/b.go:3:6: cannot inline f into g: repeated recursive cycle", Pos{}, Decision{}, false},
		{"/src/p/b.go:12:9: inlining call to f", Pos{}, Decision{}, false},
		{"/src/p/b.go:12:9: x escapes to heap", Pos{}, Decision{}, false},
		{"# example.com/p", Pos{}, Decision{}, false},
		{"C:/src/p/b.go:12: can inline f", Pos{}, Decision{}, false},
	}
	for _, tt := range tests {
		pos, d, ok := Parse(tt.line)
		if pos != tt.pos || d != tt.d || ok != tt.ok {
			t.Errorf("Parse(%q) = %v, %+v, %v; want %v, %+v, %v", tt.line, pos, d, ok, tt.pos, tt.d, tt.ok)
		}
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(Args([]string{"-p", "x", "-o", "/w/b001/_pkg_.a", "-asmhdr=/w/b001/go_asm.h", "-linkobj", "/w/l.a", "-pack", "a.go"}, "/tmp/d"), " ")
	want := "-m=2 -p x -o /tmp/d/pkg.a -asmhdr=/tmp/d/go_asm.h -linkobj /tmp/d/link.a -pack a.go"
	if got != want {
		t.Errorf("Args:\ngot  %s\nwant %s", got, want)
	}
}

func TestOff(t *testing.T) {
	for args, want := range map[string]bool{"-p x -l": true, "-p x -l=1": true, "-p x -l=4": false, "-p x": false} {
		if got := Off(strings.Fields(args)); got != want {
			t.Errorf("Off(%q) = %v, want %v", args, got, want)
		}
	}
}

// TestAsk asks the Go toolchain's own compiler about a package whose
// functions' inlining is known: small inlines, noinline and big do not,
// and the method's decision is found at its receiver.
func TestAsk(t *testing.T) {
	out, err := exec.Command("go", "env", "GOTOOLDIR").Output()
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	compile := filepath.Join(strings.TrimSpace(string(out)), "compile")
	dir := t.TempDir()
	src := `package p

type T struct{ x int }

func (t *T) Get() int { return t.x }

func small(a int) int { return a + 1 }

//go:noinline
func pinned(a int) int { return a + 1 }

func big(a int) int {
	for i := 0; i < a; i++ {
		a += pinned(i) * pinned(a)
	}
	return a
}
`
	file := filepath.Join(dir, "p.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own.a")
	want := []Pos{{"p.go", 5, 6}, {"p.go", 7, 6}, {"p.go", 10, 6}, {"p.go", 12, 6}}
	// No function stands at line 99: Ask stops at escape analysis.
	got, err := Ask(compile, []string{"-p", "p", "-o", own, "-pack", file}, append(want, Pos{"p.go", 99, 6}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(own); err == nil {
		t.Errorf("Ask wrote the compile's own output %s", own)
	}
	for i, inlinable := range []bool{true, true, false, false} {
		d, ok := got[want[i]]
		if !ok || d.Inlinable != inlinable {
			t.Errorf("decision at %v = %+v (found %v), want inlinable %v", want[i], d, ok, inlinable)
		}
	}
	if _, ok := got[Pos{"p.go", 99, 6}]; ok {
		t.Errorf("a decision at line 99, where no function stands")
	}
	if d := got[want[2]]; d.Reason != "marked go:noinline" {
		t.Errorf("pinned's reason = %q", d.Reason)
	}
}

func TestLost(t *testing.T) {
	plain := `# example.com/p
./a.go:3:6: can inline small with cost 6 as: func(int) int { return a + 1 }
./a.go:5:6: can inline (*T).Get with cost 5 as: method(*T) func() int { return t.x }
./a.go:9:6: cannot inline big: function too complex: cost 91 exceeds budget 80
./a.go:12:13: inlining call to small
./a.go:12:20: inlining call to small
./a.go:14:2: inlining call to (*T).Get
./a.go:12:13: x does not escape
# example.com/q
./a.go:3:6: can inline small with cost 9 as: func(int) int { return a + 2 }
`
	tests := []struct {
		name, probed string
		lost         []string
	}{
		{"same, columns moved, helpers added", `# example.com/p
./a.go:3:6: can inline small with cost 36 as: func(int) int { ... }
./a.go:3:6: cannot inline small_usdtTraced: function too complex: cost 120 exceeds budget 80
./a.go:5:6: can inline (*T).Get with cost 5 as: method(*T) func() int { return t.x }
./a.go:9:6: cannot inline big: function too complex: cost 150 exceeds budget 80
./a.go:12:40: inlining call to small
./a.go:12:47: inlining call to small
./a.go:12:47: inlining call to usdtAutoCall1_1[go.shape.int,go.shape.int]
./a.go:14:2: inlining call to (*T).Get
# example.com/q
./a.go:3:6: can inline small with cost 9 as: func(int) int { return a + 2 }
`, nil},
		{"a function and calls lost", `# example.com/p
./a.go:3:6: cannot inline small: function too complex: cost 85 exceeds budget 80
./a.go:5:6: can inline (*T).Get with cost 5 as: method(*T) func() int { return t.x }
./a.go:12:13: inlining call to small
./a.go:14:2: inlining call to (*T).Get
# example.com/q
`, []string{
			"example.com/p a.go:12: 1 of 2 calls of small no longer inlined",
			"example.com/p a.go:3: small no longer inlined (plain cost 6): function too complex: cost 85 exceeds budget 80",
			"example.com/q a.go:3: small no longer inlined (plain cost 9): no decision in the probed build",
		}},
	}
	p, err := Read(strings.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	if p.Inlinable() != 3 || p.Inlined() != 3 {
		t.Errorf("plain: %d inlinable, %d inlined; want 3, 3", p.Inlinable(), p.Inlined())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := Read(strings.NewReader(tt.probed))
			if err != nil {
				t.Fatal(err)
			}
			if got := Lost(p, q); strings.Join(got, "\n") != strings.Join(tt.lost, "\n") {
				t.Errorf("Lost:\ngot  %q\nwant %q", got, tt.lost)
			}
		})
	}
}
