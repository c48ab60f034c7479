package toolexec

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestFlagValue(t *testing.T) {
	args := []string{"-o", "out.a", "-p=example.com/x", "-trimpath", "$WORK/b001=>", "a.go"}
	tests := []struct{ name, want string }{
		{"o", "out.a"},
		{"p", "example.com/x"},
		{"trimpath", "$WORK/b001=>"},
		{"importcfg", ""},
	}
	for _, tt := range tests {
		if got := flagValue(args, tt.name); got != tt.want {
			t.Errorf("flagValue(-%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDecodeArg(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{`a\nb`, "a\nb"},
		{`back\\slash`, `back\slash`},
		{`trailing\`, `trailing\`},
		{`other\t`, `other\t`},
	}
	for _, tt := range tests {
		if got := decodeArg(tt.in); got != tt.want {
			t.Errorf("decodeArg(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestJoinToolexec: each want is how the go command's own quoting
// (cmd/internal/quoted.Join) writes the words; gotool.txtar has the go
// command split one with a space back.
func TestJoinToolexec(t *testing.T) {
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"/bin/usdt-toolexec", "-v"}, "/bin/usdt-toolexec -v"},
		{[]string{"/my tools/usdt-toolexec", "-rules=/a b/r.yml"}, "'/my tools/usdt-toolexec' '-rules=/a b/r.yml'"},
		{[]string{"-exec=it's here"}, `"-exec=it's here"`},
		{[]string{"'quoted"}, `"'quoted"`},
		{[]string{""}, "''"},
	}
	for _, tt := range tests {
		got, err := joinToolexec(tt.words)
		if err != nil || got != tt.want {
			t.Errorf("joinToolexec(%q) = %q, %v; want %q", tt.words, got, err, tt.want)
		}
	}
	if _, err := joinToolexec([]string{`a "b" 'c'`}); err == nil {
		t.Errorf("joinToolexec of a word with a space and both quotes: no error")
	}
}

func TestShellJoin(t *testing.T) {
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"go", "build", "-o", "bin/app", "./..."}, "go build -o bin/app ./..."},
		{[]string{"-ldflags=-s -w"}, "'-ldflags=-s -w'"},
		{[]string{"it's"}, `'it'\''s'`},
		{[]string{"$HOME", ""}, `'$HOME' ''`},
	}
	for _, tt := range tests {
		if got := shellJoin(tt.words); got != tt.want {
			t.Errorf("shellJoin(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
}

func TestToolexecFlag(t *testing.T) {
	tests := []struct {
		arg            string
		is, holdsValue bool
	}{
		{"-toolexec", true, false},
		{"--toolexec", true, false},
		{"-toolexec=x y", true, true},
		{"--toolexec=", true, true},
		{"toolexec", false, false},
		{"./toolexec", false, false},
		{"-toolexecx", false, false},
		{"-tags=toolexec", false, false},
	}
	for _, tt := range tests {
		if is, has := toolexecFlag(tt.arg); is != tt.is || is && has != tt.holdsValue {
			t.Errorf("toolexecFlag(%q) = %v, %v; want %v, %v", tt.arg, is, has, tt.is, tt.holdsValue)
		}
	}
}

func TestParseCompileFlags(t *testing.T) {
	args := []string{"-o", "$WORK/b001/_pkg_.a", "-trimpath", "$WORK/b001=>", "-p", "example.com/x", "-lang=go1.24",
		"-complete", "-importcfg", "$WORK/b001/importcfg", "-symabis", "$WORK/b001/symabis", "-shared", "-dynlink", "-pack", "/src/a.go", "/src/b.go"}
	got := parseCompileFlags(args)
	want := compileFlags{
		pkg: "example.com/x", output: "$WORK/b001/_pkg_.a", importCfg: "$WORK/b001/importcfg", lang: "go1.24",
		trimpath: "$WORK/b001=>", symabis: "$WORK/b001/symabis", pic: []string{"-shared", "-dynlink"}, goFiles: []string{"/src/a.go", "/src/b.go"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseCompileFlags = %+v, want %+v", got, want)
	}
}

// TestSymABIs: the def lines the wrapper writes are the assembler's own,
// for functions of either ABI, named in full under paths that need
// escaping.
func TestSymABIs(t *testing.T) {
	asm := []byte("// stubs\n\nTEXT usdt∕a_b_1·fire<ABIInternal>(SB), 516, $0\n\tRET\n\nTEXT usdt∕a_b_1·sites(SB), 516, $0-0\n\tRET\n\nTEXT x·y∕p·q(SB), 516, $0-0\n\tRET\n")
	dir := t.TempDir()
	src := filepath.Join(dir, "stubs.s")
	if err := os.WriteFile(src, asm, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "symabis")
	cmd := exec.Command("go", "tool", "asm", "-p", asmPackage, "-gensymabis", "-o", out, src)
	cmd.Env = append(os.Environ(), "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("asm -p %q: %v\n%s", asmPackage, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "def ") {
			want = append(want, line)
		}
	}
	if got := strings.Split(strings.TrimSuffix(string(symABIs(asm)), "\n"), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("symABIs\n%q\nwant the assembler's\n%q", got, want)
	}
}
