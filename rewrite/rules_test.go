package rewrite

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

// parseFuncs parses src and returns its file set, for a type check, and
// its function declarations by the name rules match (funcName).
func parseFuncs(t *testing.T, src string) (*token.FileSet, *ast.File, map[string]*ast.FuncDecl) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "a.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]*ast.FuncDecl{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			decls[funcName(fd)] = fd
		}
	}
	return fset, f, decls
}

// TestApplySplices keeps the edits inside [start, end], both ends
// included, and shifts them.
func TestApplySplices(t *testing.T) {
	if got := applySplices([]byte("0123456789"), 2, 5, []splice{{At: 1, Text: "A"}, {At: 2, Text: "B"}, {At: 5, Text: "C"}, {At: 6, Text: "D"}}); got != "B234C" {
		t.Errorf("applySplices = %q, want %q", got, "B234C")
	}
}

// TestFuncs: which declarations may be instrumented at all, and the names
// rules match them by.
func TestFuncs(t *testing.T) {
	src := `package p

type T[K any] struct{}
type U struct{}

func Plain() {}
func (T[K]) Generic() {}
func (*U) Ptr() {}
func (u (U)) Paren() {}
func init() {}
func (U) init() {}
func _() {}
func NoBody()

//go:nosplit
func NoSplit() {}

//go:noinline
func NoInline() {}

//go:systemstack
func System() {}

//go:nowritebarrierrec
func NoWB() {}

//go:uintptrescapes
func Escapes(uintptr) {}

//go:cgo_unsafe_args
func CgoArgs() {}

//go:linkname Linked runtime.x
func Linked() {}
`
	_, f, _ := parseFuncs(t, src)
	got := map[string]bool{}
	for _, fd := range funcs(f) {
		got[funcName(fd)] = true
	}
	want := map[string]bool{
		"Plain": true, "T.Generic": true, "U.Ptr": true, "U.Paren": true,
		"U.init":   true, // a method named init is an ordinary method
		"NoInline": true, "Linked": true,
	}
	for name := range want {
		if !got[name] {
			t.Errorf("%s is not instrumentable, want it to be", name)
		}
	}
	for name := range got {
		if !want[name] {
			t.Errorf("%s is instrumentable, want it left alone", name)
		}
	}
}

// TestSplittable: which functions get an untraced copy of themselves
// (see instrument).
func TestSplittable(t *testing.T) {
	// Declarations the functions under test may use.
	const decls = `
import (
	"math/bits"
	str "strings"
	"sync/atomic"
	"time"
	"unsafe"
)

type Cents int64

func helper() int { return 1 }

var (
	_ = bits.Len
	_ = str.Index
	_ atomic.Int32
	_ time.Duration
	_ unsafe.Pointer
)
`
	tests := []struct {
		name string
		src  string
		want bool
	}{
		{"small", "func F(a int) int { return a + 1 }", true},
		{"noinline", "//go:noinline\nfunc F(a int) int { return a }", true},
		{"norace", "//go:norace\nfunc F() {}", true},
		{"linkname", "//go:linkname F x.F\nfunc F() {}", false},
		{"type in body", "func F() { type t int; _ = t(1) }", false},
		{"recover", "func F() { recover() }", false},
		{"recover in parentheses", "func F() { (recover)() }", false},
		{"blank type parameter", "func F[_ any]() {}", false},
		{"named type parameter", "func F[K any](k K) K { return k }", true},
		// The body's nodes: the block, 2 per a++ (statement, identifier),
		// and the return's 3 (statement, unary, identifier) or 2.
		{"16 nodes", "func F(a int) int { a++; a++; a++; a++; a++; a++; return -a }", true},
		{"17 nodes", "func F(a int) int { a++; a++; a++; a++; a++; a++; a++; return a }", false},
		// Calls of probed functions leave the untraced function out of
		// line whatever its size.
		{"call", "func F() int { return helper() }", false},
		{"call of an import", "func F(s string) int { return bits.Len(uint(len(s))) }", false},
		{"call through a renamed import", "func F(s string) int { return str.Index(s, \"x\") }", false},
		{"method call", "func F(d time.Duration) int64 { return d.Nanoseconds() }", false},
		{"func value", "func F(f func() int) int { return f() }", false},
		{"builtins", "func F(s []int) int { return len(s) + cap(s) + min(1, 2) }", true},
		{"conversions", "func F(c Cents) int64 { return int64(c) + int64(Cents(1)) }", true},
		{"conversions to imported types", "func F(p *int) time.Duration { return time.Duration(uintptr(unsafe.Pointer(p))) }", true},
		{"conversions to type literals", "func F(p unsafe.Pointer) *[2]int { return (*[2]int)(p) }", true},
		{"unsafe's functions", "func F(p *int) uintptr { return unsafe.Sizeof(*p) }", true},
		{"a never probed package", "func F(x *int32) int32 { return atomic.LoadInt32(x) }", true},
		// The block, the return, the literal, the selector's 3.
		{"two results, 6 nodes", "func F() (int, time.Duration) { return 0, time.Second }", true},
		{"two results, 7 nodes", "func F(a int) (int, bool) { return -a, a > 0 }", false},
		{"three results", "func F() (a, b, c int) { return }", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset, f, funcs := parseFuncs(t, "package p\n"+decls+"\n"+tt.src+"\n")
			pkg, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil)
			if err != nil {
				t.Fatal(err)
			}
			g := &generator{pkg: pkg, real: func(p *types.Package) *types.Package { return p }}
			if got := g.splittable(&file{ast: f}, funcs["F"]); got != tt.want {
				t.Errorf("splittable = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConvert: how a value of each type reaches a probe (docs/rules.md, "The probe
// contract").
func TestConvert(t *testing.T) {
	src := `package p

import "unsafe"

type (
	Named    int32
	Float    float64
	Str      string
	Iface    interface{ M() }
	Struct   struct{ a, b int }
	Bytes    []byte
)

var (
	vBool    bool
	vInt     int
	vInt8    int8
	vUint16  uint16
	vUint    uint
	vUintptr uintptr
	vNamed   Named
	vStr     Str
	vF32     float32
	vFloat   Float
	vC128    complex128
	vPtr     *int
	vUnsafe  unsafe.Pointer
	vMap     map[int]int
	vChan    chan int
	vFunc    func()
	vAny     any
	vIface   Iface
	vSlice   []int
	vBytes   Bytes
	vArray   [2]int
	vStruct  Struct
)
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		v    string
		kind probe.Kind
		expr string
	}{
		{"vBool", probe.Bool, "gBool(bool(x))"},
		{"vInt", probe.Int64, "uint64(x)"},
		{"vInt8", probe.Int8, "uint64(x)"},
		{"vUint16", probe.Uint16, "uint64(x)"},
		{"vUint", probe.Uint64, "uint64(x)"},
		{"vUintptr", probe.Uintptr, "uint64(x)"},
		{"vNamed", probe.Int32, "uint64(x)"},
		{"vStr", probe.String, "string(x)"},
		{"vF32", probe.Uint32, "gF32(float32(x))"},
		{"vFloat", probe.Uint64, "gF64(float64(x))"},
		{"vC128", probe.Uint64, "0"},
		{"vPtr", probe.Pointer, "gWord(gPointer(x))"},
		{"vUnsafe", probe.Pointer, "gWord(gPointer(x))"},
		{"vMap", probe.Pointer, "gData(x)"},
		{"vChan", probe.Pointer, "gData(x)"},
		{"vFunc", probe.Pointer, "gData(x)"},
		{"vAny", probe.Pointer, "gWord(gPointer(&x))"},
		{"vIface", probe.Pointer, "gWord(gPointer(&x))"},
		{"vSlice", probe.Pointer, "gWord(gPointer(&x))"},
		{"vBytes", probe.Pointer, "gWord(gPointer(&x))"},
		{"vArray", probe.Pointer, "gWord(gPointer(&x))"},
		{"vStruct", probe.Pointer, "gWord(gPointer(&x))"},
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			typ := pkg.Scope().Lookup(tt.v).Type()
			kind, expr := convertNamed(typ, "x", func(name string) string { return name }, "g")
			if kind != tt.kind || expr != tt.expr {
				t.Errorf("convert(%s) = %v %q, want %v %q", typ, kind, expr, tt.kind, tt.expr)
			}
		})
	}
}

// TestExitReadsFire: an exit probe's reads go with its site, and its fire
// method is the same for every function with as many word results, unless
// a string, a constant, a value of a type parameter, more than maxSharedReads results or a site too
// large for the reads above it needs them spelled out.
func TestExitReadsFire(t *testing.T) {
	ptrs := func(n int) []string { return make([]string, n) }
	tests := []struct {
		name  string
		x     exitReads
		site  int
		exprs []string
		held  string
	}{
		{"no results", exitReads{}, 7, []string{"x.site"}, "7"},
		{"words", exitReads{ptrs: ptrs(2), reads: []read{readWord, readWord}}, 9,
			[]string{"x.site&0x3fffff", "usdtAutoRead(x.site>>22, x.a1)", "usdtAutoRead(x.site>>25, x.a2)"}, "9"},
		{"mixed", exitReads{ptrs: ptrs(3), reads: []read{readU8, readWord, readAddr}}, 11,
			[]string{"x.site&0x3fffff", "usdtAutoRead(x.site>>22, x.a1)", "usdtAutoRead(x.site>>25, x.a2)", "usdtAutoRead(x.site>>28, x.a3)"}, "11|0401<<22"},
		{"string", exitReads{ptrs: ptrs(2), reads: []read{readAddr, readString}}, 3,
			[]string{"x.site", "usdtAutoWord(x.a1)", "*(*string)(x.a2)"}, "3"},
		{"type parameter", exitReads{ptrs: ptrs(2), reads: []read{readWord, readBox}}, 3,
			[]string{"x.site", "*(*uint64)(x.a1)", "usdtAutoWord(unsafe.Pointer(&b2))"}, "3"},
		{"constant", exitReads{ptrs: ptrs(1), reads: []read{readZero, readU32}}, 3,
			[]string{"x.site", "0", "uint64(*(*uint32)(x.a1))"}, "3"},
		{"four results", exitReads{ptrs: ptrs(4), reads: []read{readWord, readU16, readWord, readWord}}, 5,
			[]string{"x.site", "*(*uint64)(x.a1)", "uint64(*(*uint16)(x.a2))", "*(*uint64)(x.a3)", "*(*uint64)(x.a4)"}, "5"},
		{"site too large", exitReads{ptrs: ptrs(1), reads: []read{readU8}}, 1 << readShift,
			[]string{"x.site", "uint64(*(*uint8)(x.a1))"}, "4194304"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exprs, held, shared := tt.x.fire(tt.site)
			if !slices.Equal(exprs, tt.exprs) || held != tt.held || shared != (tt.exprs[0] != "x.site") {
				t.Errorf("fire(%d) = %q, %q, %v; want %q, %q", tt.site, exprs, held, shared, tt.exprs, tt.held)
			}
		})
	}
}

// TestProbeCode: cgo's glue and usdtgen's output are never instrumented.
func TestProbeCode(t *testing.T) {
	tests := []struct {
		path, src string
		want      bool
	}{
		{"a.go", "package p\n", false},
		{"_cgo_gotypes.go", "package p\n", true},
		{"a_usdt_gen.go", "// Code generated by usdtgen from a.d. DO NOT EDIT.\n\npackage p\n", true},
		{"b.go", "// Code generated by stringer. DO NOT EDIT.\n\npackage p\n", false},
		{"c.go", "package p\n\n// Code generated by usdtgen, after the package clause.\n", false},
	}
	for _, tt := range tests {
		f, err := parser.ParseFile(token.NewFileSet(), tt.path, tt.src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if got := probeCode(&file{path: tt.path, src: []byte(tt.src), ast: f}); got != tt.want {
			t.Errorf("probeCode(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// TestExcluded: the runtime and what it is built from are never
// instrumented, whatever the rules say; the rest of the standard library
// may be.
func TestExcluded(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"runtime", true},
		{"runtime/debug", true},
		{"internal/runtime/atomic", true},
		{"internal/abi", true},
		{"sync/atomic", true},
		{"unsafe", true},
		{"github.com/go-usdt/usdt/runtime", true},
		{"sync", false},
		{"strings", false},
		{"internal/poll", false},
		{"example.com/runtime", false},
		{"github.com/go-usdt/usdt/runtime/sub", false},
		{"main", false},
	}
	for _, tt := range tests {
		if got := Excluded(tt.path); got != tt.want {
			t.Errorf("Excluded(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestOwnPrefix(t *testing.T) {
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"main", true},
		{"encoding/json", true},
		{"vendor/golang.org/x/net/idna", true},
		{"example.com/v2/p_q", true},
		{"example.com/9p", true},
		{"github.com/google/go-jsonnet", false}, // '-'
		{"gopkg.in/yaml.v3", false},             // escaped to yaml%2ev3
		{"9fans.net/go/acme", false},            // a leading digit
		{"example.com/ü", false},                // escaped, as all non-ASCII
		{"example.com/a~b", false},
		{".x/y", false},
		{"", false},
	} {
		if got := ownPrefix(tt.path); got != tt.want {
			t.Errorf("ownPrefix(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// TestLinkerPrefix checks the escaping cmd/internal/objabi.PathToPrefix
// gives import paths in symbol names, by which a note-only probe's record
// names its function: a wrong one leaves the function without notes.
func TestLinkerPrefix(t *testing.T) {
	for _, tt := range []struct{ path, want string }{
		{"main", "main"},
		{"encoding/json", "encoding/json"},
		{"gopkg.in/yaml.v3", "gopkg.in/yaml%2ev3"},
		{"a.b/c.d/e.f", "a.b/c.d/e%2ef"},
		{"github.com/google/go-jsonnet", "github.com/google/go-jsonnet"},
		{"example.com/ü", "example.com/%c3%bc"},
		{"example.com/a b%c\"d", "example.com/a%20b%25c%22d"},
	} {
		if got := linkerPrefix(tt.path); got != tt.want {
			t.Errorf("linkerPrefix(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestPrune(t *testing.T) {
	const support = `package p

import "unsafe"

type usdtAutoPointer = unsafe.Pointer

var usdtAutoTable struct{ semaphores [1]uint16 }

// usdtAutoWord is used by usdtAutoData only.
func usdtAutoWord(p unsafe.Pointer) uint64 { return *(*uint64)(unsafe.Pointer(&p)) }

func usdtAutoData(p unsafe.Pointer) uint64 { return usdtAutoWord(p) }

// usdtAutoBool is used by nothing.
func usdtAutoBool(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

type usdtAutoCString [2]byte

func (b *usdtAutoCString) set(s string) *byte { return &b[0] }

//go:noinline
func usdtAutoFire0(site int, a1 string) {
	var b1 usdtAutoCString
	usdtAutoTramp0(site, b1.set(a1))
}

func usdtAutoTramp0(site int, a1 *byte)

func usdtAutoFire1(site int, a1 uint64)
`
	g := &generator{prefix: "usdtAuto1"}
	out, err := g.prune([]byte(support), "if usdtAuto1Table.semaphores[0] != 0 { usdtAuto1Fire1(0, usdtAuto1Data(nil)) }")
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, kept := range []string{"usdtAutoPointer =", "usdtAutoTable struct", "func usdtAutoWord", "func usdtAutoData", "func usdtAutoFire1"} {
		if !strings.Contains(got, kept) {
			t.Errorf("pruned %q, which is used:\n%s", kept, got)
		}
	}
	for _, gone := range []string{"usdtAutoBool", "usdtAutoCString", "set(", "usdtAutoFire0", "usdtAutoTramp0"} {
		if strings.Contains(got, gone) {
			t.Errorf("kept %q, which nothing uses:\n%s", gone, got)
		}
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "", out, 0); err != nil {
		t.Errorf("pruned file does not parse: %v\n%s", err, got)
	}
}
