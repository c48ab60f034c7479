package rewrite_test

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/rewrite"
	"github.com/go-usdt/usdt/rules"
)

// TestStandInImportsChangeNothing instruments every standard package that
// can be, every function with entry and exit probes both ways, once with
// the imports that only function bodies use stood in for by empty
// packages and once with every import read, and wants the same files.
func TestStandInImportsChangeNothing(t *testing.T) {
	patterns := []string{"std"}
	if testing.Short() {
		patterns = []string{"encoding/json", "flag", "go/types", "net/http", "text/template"}
	}
	for _, text := range []string{atReturns, deferred} {
		r, err := rules.Parse("rules.yml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range stdConfigs(t, patterns...) {
			if rewrite.Excluded(cfg.ImportPath) {
				continue
			}
			cfg.Rules = r
			cfg.MatchPath = "example.com/shop"
			with := instrumentStd(t, cfg, true)
			without := instrumentStd(t, cfg, false)
			if with == nil || without == nil {
				if (with == nil) != (without == nil) {
					t.Errorf("%s: instrumented with stand-ins %v, without %v", cfg.ImportPath, with != nil, without != nil)
				}
				continue
			}
			if with.Skipped != without.Skipped || !bytes.Equal(with.Asm, without.Asm) || !slices.Equal(with.Files, without.Files) ||
				!maps.EqualFunc(with.Sources, without.Sources, bytes.Equal) {
				t.Errorf("%s (%q): stand-in imports change what is generated", cfg.ImportPath, text)
			}
		}
	}
}

func instrumentStd(t *testing.T, cfg rewrite.Config, standIns bool) *rewrite.Result {
	t.Helper()
	defer rewrite.SetStandInImports(standIns)()
	cfg.OutDir = "/nonexistent/out"
	res, err := rewrite.Package(cfg)
	if err != nil {
		t.Fatalf("%s: %v", cfg.ImportPath, err)
	}
	return res
}

// TestDeclImports: which imports the type-check reads, where the others
// get an empty stand-in.
func TestDeclImports(t *testing.T) {
	tests := []struct {
		name         string
		src          string
		want, behind []string
		ok           bool
	}{
		{"bodies only", `import ("fmt"; "strings"); func F(s string) { fmt.Println(strings.ToUpper(s)) }`, []string{}, nil, true},
		{"parameter and result", `import ("io"; "time"); func F(r io.Reader) time.Duration { return 0 }`, []string{"io", "time"}, nil, true},
		{"receiver and type parameter", `import ("cmp"; "sync"); type L[T any] struct{}; func (l *L[T]) F() {}; func G[T cmp.Ordered](l *L[sync.Mutex]) {}`, []string{"cmp", "sync"}, nil, true},
		{"defined by another type", `import "time"; type D time.Duration`, []string{"time"}, nil, true},
		{"alias", `import "io"; type R = io.Reader`, []string{"io"}, nil, true},
		{"instantiated", `import "sync/atomic"; type P atomic.Pointer[int]`, []string{"sync/atomic"}, nil, true},
		{"struct fields and methods", `import ("bufio"; "io"); type T struct{ w *bufio.Writer }; type I interface{ io.Reader; M(bufio.Reader) }`, []string{}, nil, true},
		{"variables", `import ("errors"; "sync"); var Err = errors.New("x"); var mu sync.Mutex`, []string{}, nil, true},
		{"constant", `import "unsafe"; const N = unsafe.Sizeof(0); type A [N]byte; func F(a A) {}`, []string{"unsafe"}, nil, true},
		{"renamed", `import str "strings"; func F(b *str.Builder) {}`, []string{"strings"}, nil, true},
		{"dot and blank", `import (. "strings"; _ "embed"); func F(b *Builder) {}`, []string{"strings"}, nil, true},
		{"behind a pointer", `import "math/rand/v2"; func F(r *rand.Rand) {}`, []string{}, []string{"rand(math/rand/v2).Rand"}, true},
		{"behind a slice, map, channel, func, ellipsis", `import ("io"; "os"; "time"); func F(a []io.Reader, m map[os.Signal]time.Month, c chan os.File, f func(io.Writer), xs ...time.Time) {}`,
			[]string{}, []string{"io(io).Reader", "io(io).Writer", "os(os).File", "os(os).Signal", "time(time).Month", "time(time).Time"}, true},
		{"behind and named", `import "os"; func F(f *os.File) os.FileMode { return 0 }`, []string{"os"}, nil, true},
		{"behind, generic", `import "sync/atomic"; func F(p *atomic.Pointer[int]) {}`, []string{"sync/atomic"}, nil, true},
		{"pointer type", `import "os"; type H *os.File`, []string{}, []string{"os(os).File"}, true},
		{"pointer alias", `import "os"; type H = **os.File`, []string{}, []string{"os(os).File"}, true},
		{"named otherwise than its path", `import "github.com/google/go-jsonnet"; func F(vm *jsonnet.VM) {}`, []string{}, []string{"jsonnet(github.com/google/go-jsonnet).VM"}, true},
		{"named otherwise, beyond a guess", `import "github.com/json-iterator/go"; func F(c *jsoniter.Config) {}`, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, behind, ok := rewrite.DeclImports("package p\n" + tt.src + "\n")
			if ok != tt.ok || ok && (!slices.Equal(got, tt.want) || !slices.Equal(behind, tt.behind)) {
				t.Errorf("DeclImports = %q, %q, %v; want %q, %q, %v", got, behind, ok, tt.want, tt.behind, tt.ok)
			}
		})
	}
}

func TestGuessName(t *testing.T) {
	for path, want := range map[string]string{
		"fmt":                  "fmt",
		"net/http":             "http",
		"math/rand/v2":         "rand",
		"gopkg.in/yaml.v3":     "yaml",
		"example.com/v2":       "example",
		"github.com/x/go-json": "go-json",
	} {
		if got := rewrite.GuessName(path); got != want {
			t.Errorf("GuessName(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestStandInsNeededAfterAll: a signature that names a type of an import
// only a struct's fields use, through an alias, gets it read all the same.
func TestStandInsNeededAfterAll(t *testing.T) {
	paths := writeFiles(t, map[string]string{"a.go": `package shop

import (
	"fmt"
	"strings"
)

type T = struct{ b strings.Builder }

type U struct{ s fmt.Stringer }

func F(t T, u U) int { return len(fmt.Sprint(t.b.String(), u)) }
`})
	cfg := rewrite.Config{ImportPath: "example.com/shop", ImportCfg: stdImportCfg(t), GOARCH: "amd64"}
	with, err := rewrite.Signatures(cfg, paths)
	if err != nil {
		t.Fatal(err)
	}
	defer rewrite.SetStandInImports(false)()
	without, err := rewrite.Signatures(cfg, paths)
	if err != nil {
		t.Fatal(err)
	}
	if with["F"] != without["F"] || with["F"] != "struct{b strings.Builder}, U" {
		t.Errorf("F is %q with stand-ins, %q without", with["F"], without["F"])
	}
}

// TestStandInPointerType: a pointer type defined by an import's type gets
// the import read, and the probes pass the pointer: go/types makes a
// pointer to an invalid type invalid, and a stand-in has no types. (An
// alias of it makes the signature invalid, and the check reads every
// import anyway.)
func TestStandInPointerType(t *testing.T) {
	paths := writeFiles(t, map[string]string{"a.go": `package shop

import "os"

type handle *os.File

func F(h handle) handle { return h }
`})
	r, err := rules.Parse("rules.yml", []byte(atReturns))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rewrite.Config{ImportPath: "example.com/shop", MatchPath: "example.com/shop", ImportCfg: stdImportCfg(t), GOARCH: "amd64", Files: paths, Rules: r}
	with := instrumentStd(t, cfg, true)
	without := instrumentStd(t, cfg, false)
	if !maps.EqualFunc(with.Sources, without.Sources, bytes.Equal) {
		t.Errorf("stand-in imports change what is generated")
	}
	for path, src := range with.Sources {
		if strings.Contains(path, "rewritten") && !strings.Contains(string(src), "usdtAutoWord(usdtAutoPointer(h))") {
			t.Errorf("the entry probe does not pass the pointer h:\n%s", src)
		}
	}
}
