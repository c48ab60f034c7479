package provider

import (
	"errors"
	"flag"
	"github.com/go-usdt/usdt/internal/diag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden from the parser's output")

// at is a position in the file every table test is parsed as.
func at(line, col int) Pos { return Pos{File: "test.d", Line: line, Col: col} }

type arg struct {
	name, ctype string
	kind        probe.Kind
}

func mkProbe(provider, name string, pos Pos, args ...arg) Probe {
	p := Probe{Probe: probe.Probe{Provider: provider, Name: name}, Pos: pos}
	for _, a := range args {
		p.Args = append(p.Args, probe.Arg{Name: a.name, Type: a.kind.GoType(), Kind: a.kind})
		p.ArgTypes = append(p.ArgTypes, a.ctype)
	}
	return p
}

var goodTests = []struct {
	name string
	src  string
	want []Provider
}{
	{
		name: "minimal",
		src:  "provider app { probe start(); };",
		want: []Provider{{Name: "app", Pos: at(1, 10), Probes: []Probe{
			mkProbe("app", "start", at(1, 22)),
		}}},
	},
	{
		name: "several providers, optional semicolon",
		src: `provider a {
	probe x(int);
}
provider b {
	probe x(int);
};
`,
		want: []Provider{
			{Name: "a", Pos: at(1, 10), Probes: []Probe{mkProbe("a", "x", at(2, 8), arg{"arg0", "int", probe.Int32})}},
			{Name: "b", Pos: at(4, 10), Probes: []Probe{mkProbe("b", "x", at(5, 8), arg{"arg0", "int", probe.Int32})}},
		},
	},
	{
		name: "empty provider",
		src:  "provider idle {};",
		want: []Provider{{Name: "idle", Pos: at(1, 10)}},
	},
	{
		name: "no arguments",
		src:  "provider p { probe a(); probe b(void); probe c( void ) ; };",
		want: []Provider{{Name: "p", Pos: at(1, 10), Probes: []Probe{
			mkProbe("p", "a", at(1, 20)),
			mkProbe("p", "b", at(1, 31)),
			mkProbe("p", "c", at(1, 46)),
		}}},
	},
	{
		name: "comments and directives",
		src: `// leading comment
/* block
   comment */
#pragma D option quiet
  #  pragma D depends_on library net.d
#include "types.h" // not followed
#if defined(__linux__)
#endif
provider /* here */ p // there
{
	probe /* a */ a(int /* count */ n); // trailing
};
#pragma D attributes Evolving/Evolving/Common provider p provider
#pragma D attributes \
	Private/Private/Unknown provider p module
`,
		want: []Provider{{Name: "p", Pos: at(9, 21), Probes: []Probe{
			mkProbe("p", "a", at(11, 16), arg{"n", "int", probe.Int32}),
		}}},
	},
	{
		name: "aliases",
		src: `#define Oid unsigned int
#define Name const char *
#define OidAlias Oid
#  define LOCKMODE \
	int
typedef Oid relid_t;
typedef relid_t *relidp_t, **relidpp_t, relid2_t;
typedef const char *str2_t, char_t;
typedef char *str_t;
typedef struct conn conn_t;
typedef void *handle_t;
provider pg {
	probe lock(Oid db, relid_t rel, LOCKMODE mode, OidAlias o, relid2_t r2, char_t c);
	probe ptrs(relidp_t p, relidpp_t pp, str_t s, str_t *sp, conn_t *c, handle_t h, Name n, str2_t s2);
};
`,
		want: []Provider{{Name: "pg", Pos: at(12, 10), Probes: []Probe{
			mkProbe("pg", "lock", at(13, 8),
				arg{"db", "Oid", probe.Uint32},
				arg{"rel", "relid_t", probe.Uint32},
				arg{"mode", "LOCKMODE", probe.Int32},
				arg{"o", "OidAlias", probe.Uint32},
				arg{"r2", "relid2_t", probe.Uint32},
				arg{"c", "char_t", probe.Int8}),
			mkProbe("pg", "ptrs", at(14, 8),
				arg{"p", "relidp_t", probe.Pointer},
				arg{"pp", "relidpp_t", probe.Pointer},
				arg{"s", "str_t", probe.String},
				arg{"sp", "str_t *", probe.Pointer},
				arg{"c", "conn_t *", probe.Pointer},
				arg{"h", "handle_t", probe.Pointer},
				arg{"n", "Name", probe.String},
				arg{"s2", "str2_t", probe.String}),
		}}},
	},
	{
		name: "aliases may shadow built-in names, as PostgreSQL's bool",
		src: `#define bool unsigned char
typedef unsigned long size_t;
#define VERSION 3
provider pg { probe p(bool b, size_t n); };
`,
		want: []Provider{{Name: "pg", Pos: at(4, 10), Probes: []Probe{
			mkProbe("pg", "p", at(4, 21), arg{"b", "bool", probe.Uint8}, arg{"n", "size_t", probe.Uint64}),
		}}},
	},
	{
		name: "undef and identical redefinition",
		src: `#define T int
#define T int
typedef long L;
typedef long L;
provider p { probe a(T x, L y); };
#undef T
#define T char *
provider q { probe a(T x); };
`,
		want: []Provider{
			{Name: "p", Pos: at(5, 10), Probes: []Probe{
				mkProbe("p", "a", at(5, 20), arg{"x", "T", probe.Int32}, arg{"y", "L", probe.Int64}),
			}},
			{Name: "q", Pos: at(8, 10), Probes: []Probe{
				mkProbe("q", "a", at(8, 20), arg{"x", "T", probe.String}),
			}},
		},
	},
	{
		name: "parameter names",
		src: `provider p {
	probe a(int, char *name, long type, long func, int _, uint8_t range);
	probe b(int arg1, int, int arg2);
	probe c(int probe__, int Ünïcode, int x9);
};`,
		want: []Provider{{Name: "p", Pos: at(1, 10), Probes: []Probe{
			mkProbe("p", "a", at(2, 8),
				arg{"arg0", "int", probe.Int32},
				arg{"name", "char *", probe.String},
				arg{"arg2", "long", probe.Int64},
				arg{"arg3", "long", probe.Int64},
				arg{"arg4", "int", probe.Int32},
				arg{"arg5", "uint8_t", probe.Uint8}),
			mkProbe("p", "b", at(3, 8),
				arg{"arg0", "int", probe.Int32},
				arg{"arg1", "int", probe.Int32},
				arg{"arg2", "int", probe.Int32}),
			mkProbe("p", "c", at(4, 8),
				arg{"probe__", "int", probe.Int32},
				arg{"Ünïcode", "int", probe.Int32},
				arg{"x9", "int", probe.Int32}),
		}}},
	},
	{
		name: "qualifiers anywhere",
		src: `provider p {
	probe q(char const *a, const char * const b, volatile int c, int volatile const d,
		const char *restrict e, const unsigned char *f, char *const *g);
};`,
		want: []Provider{{Name: "p", Pos: at(1, 10), Probes: []Probe{
			mkProbe("p", "q", at(2, 8),
				arg{"a", "char const *", probe.String},
				arg{"b", "const char * const", probe.String},
				arg{"c", "volatile int", probe.Int32},
				arg{"d", "int volatile const", probe.Int32},
				arg{"e", "const char * restrict", probe.String},
				arg{"f", "const unsigned char *", probe.Pointer},
				arg{"g", "char * const *", probe.Pointer}),
		}}},
	},
	{
		name: "translated form uses the native list",
		src: `provider p {
	probe t(struct conn *c, int n) : (conninfo_t *c, string s, (nested) x);
};`,
		want: []Provider{{Name: "p", Pos: at(1, 10), Probes: []Probe{
			mkProbe("p", "t", at(2, 8), arg{"c", "struct conn *", probe.Pointer}, arg{"n", "int", probe.Int32}),
		}}},
	},
	{
		name: "twelve arguments are allowed",
		src:  "provider p { probe full(int, int, int, int, int, int, int, int, int, int, int, char *); };",
		want: []Provider{{Name: "p", Pos: at(1, 10), Probes: []Probe{
			mkProbe("p", "full", at(1, 20),
				arg{"arg0", "int", probe.Int32}, arg{"arg1", "int", probe.Int32}, arg{"arg2", "int", probe.Int32},
				arg{"arg3", "int", probe.Int32}, arg{"arg4", "int", probe.Int32}, arg{"arg5", "int", probe.Int32},
				arg{"arg6", "int", probe.Int32}, arg{"arg7", "int", probe.Int32}, arg{"arg8", "int", probe.Int32},
				arg{"arg9", "int", probe.Int32}, arg{"arg10", "int", probe.Int32}, arg{"arg11", "char *", probe.String}),
		}}},
	},
	{
		name: "same probe name in two providers, forward declarations",
		src: `struct conn;
union u;
provider a { probe x(struct conn *); };
provider b { probe x(union u *); };
`,
		want: []Provider{
			{Name: "a", Pos: at(3, 10), Probes: []Probe{mkProbe("a", "x", at(3, 20), arg{"arg0", "struct conn *", probe.Pointer})}},
			{Name: "b", Pos: at(4, 10), Probes: []Probe{mkProbe("b", "x", at(4, 20), arg{"arg0", "union u *", probe.Pointer})}},
		},
	},
	{
		// Columns count bytes, a tab being one, but not the byte order
		// mark that editors hide.
		name: "white space is normalised",
		src:  "\ufeffprovider\tp{probe\ta(const\n\t\tchar\t*  *x,unsigned   long\tlong y);}\r\n",
		want: []Provider{{Name: "p", Pos: at(1, 10), Probes: []Probe{
			mkProbe("p", "a", at(1, 18), arg{"x", "const char **", probe.Pointer}, arg{"y", "unsigned long long", probe.Uint64}),
		}}},
	},
	{
		name: "CRLF line endings",
		src:  "#define T int\r\nprovider p {\r\n\tprobe a(T t);\r\n};\r\n",
		want: []Provider{{Name: "p", Pos: at(2, 10), Probes: []Probe{
			mkProbe("p", "a", at(3, 8), arg{"t", "T", probe.Int32}),
		}}},
	},
	{
		name: "macro body with a string keeps // from starting a comment",
		src:  "#define MSG \"a // b\"\nprovider p { probe a(); };",
		want: []Provider{{Name: "p", Pos: at(2, 10), Probes: []Probe{mkProbe("p", "a", at(2, 20))}}},
	},
}

func TestParseGood(t *testing.T) {
	for _, tt := range goodTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("test.d", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse =\n%s\nwant\n%s", dump(got), dump(tt.want))
			}
		})
	}
}

// TestTypeMapping checks the documented table, one C spelling at a time.
func TestTypeMapping(t *testing.T) {
	tests := []struct {
		ctype string
		kind  probe.Kind
		text  string // normalised spelling, when not ctype itself
	}{
		{"int8_t", probe.Int8, ""},
		{"char", probe.Int8, ""},
		{"signed char", probe.Int8, ""},
		{"char signed", probe.Int8, ""},
		{"uint8_t", probe.Uint8, ""},
		{"unsigned char", probe.Uint8, ""},
		{"int16_t", probe.Int16, ""},
		{"short", probe.Int16, ""},
		{"short int", probe.Int16, ""},
		{"signed short", probe.Int16, ""},
		{"signed short int", probe.Int16, ""},
		{"uint16_t", probe.Uint16, ""},
		{"unsigned short", probe.Uint16, ""},
		{"unsigned short int", probe.Uint16, ""},
		{"int32_t", probe.Int32, ""},
		{"int", probe.Int32, ""},
		{"signed", probe.Int32, ""},
		{"signed int", probe.Int32, ""},
		{"uint32_t", probe.Uint32, ""},
		{"unsigned", probe.Uint32, ""},
		{"unsigned int", probe.Uint32, ""},
		{"int unsigned", probe.Uint32, ""},
		{"int64_t", probe.Int64, ""},
		{"long", probe.Int64, ""},
		{"long int", probe.Int64, ""},
		{"long long", probe.Int64, ""},
		{"long long int", probe.Int64, ""},
		{"signed long long", probe.Int64, ""},
		{"ssize_t", probe.Int64, ""},
		{"intptr_t", probe.Int64, ""},
		{"off_t", probe.Int64, ""},
		{"uint64_t", probe.Uint64, ""},
		{"unsigned long", probe.Uint64, ""},
		{"unsigned long int", probe.Uint64, ""},
		{"unsigned long long", probe.Uint64, ""},
		{"long unsigned long int", probe.Uint64, ""},
		{"size_t", probe.Uint64, ""},
		{"uintptr_t", probe.Uintptr, ""},
		{"char *", probe.String, ""},
		{"char*", probe.String, "char *"},
		{"const char *", probe.String, ""},
		{"const   char*", probe.String, "const char *"},
		{"string", probe.String, ""},
		{"bool", probe.Bool, ""},
		{"_Bool", probe.Bool, ""},
		{"void *", probe.Pointer, ""},
		{"const void *", probe.Pointer, ""},
		{"unsigned char *", probe.Pointer, ""},
		{"signed char *", probe.Pointer, ""},
		{"char **", probe.Pointer, ""},
		{"char * *", probe.Pointer, "char **"},
		{"int *", probe.Pointer, ""},
		{"uint64_t *", probe.Pointer, ""},
		{"string *", probe.Pointer, ""},
		{"struct foo *", probe.Pointer, ""},
		{"union bar **", probe.Pointer, ""},
		{"enum color *", probe.Pointer, ""},
		{"double *", probe.Pointer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.ctype, func(t *testing.T) {
			provs, err := Parse("test.d", []byte("provider p { probe a("+tt.ctype+" x); };"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			pr := provs[0].Probes[0]
			want := tt.text
			if want == "" {
				want = tt.ctype
			}
			if len(pr.Args) != 1 || pr.Args[0].Kind != tt.kind || pr.Args[0].Name != "x" || pr.ArgTypes[0] != want {
				t.Errorf("got %v %q, want [{x %v}] [%q]", pr.Args, pr.ArgTypes, tt.kind, want)
			}
		})
	}
}

// TestGoodFiles parses the realistic examples and checks them against a
// hand-written summary: provider.probe(name kind, ...) per line.
func TestGoodFiles(t *testing.T) {
	want := map[string]string{
		"shop.d": `shop@16:10
shop.request__start@18:8(method string, path string, content_length int64)
shop.request__done@19:8(path string, status int32, duration_ns uint64)
shop.order__placed@22:8(id uint64, cents int64, currency string)
shop.order__failed@23:8(id uint64, reason string)
shop.cache__hit@26:8(key string, size uint64)
shop.cache__miss@27:8(key string)
shop.cache__evict@28:8(key string, expired uint8, shard int32)
shop.session__open@30:8(s pointer, uid uint64, conn pointer)
shop.gc@31:8()
shop.tick@32:8()
shop_db@35:10
shop_db.query__start@36:8(sql string, shard int32)
shop_db.query__done@37:8(sql string, rows int64, err int32)
`,
	}
	files, err := filepath.Glob("testdata/good/*.d")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			provs, err := Parse(file, src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			w, ok := want[filepath.Base(file)]
			if !ok {
				t.Fatalf("no expectation for %s", file)
			}
			if got := summary(provs); got != w {
				t.Errorf("got\n%s\nwant\n%s", got, w)
			}
		})
	}
}

func summary(provs []Provider) string {
	var b strings.Builder
	for _, p := range provs {
		b.WriteString(p.Name + "@" + lineCol(p.Pos) + "\n")
		for _, pr := range p.Probes {
			var args []string
			for _, a := range pr.Args {
				args = append(args, a.Name+" "+a.Kind.String())
			}
			b.WriteString(p.Name + "." + pr.Name + "@" + lineCol(pr.Pos) + "(" + strings.Join(args, ", ") + ")\n")
		}
	}
	return b.String()
}

func lineCol(p Pos) string { return Pos{Line: p.Line, Col: p.Col}.String() }

// TestBadFiles compares the errors for each testdata/bad/NAME.d with
// NAME.golden. The goldens are what a user reads, so they are reviewed by
// hand after -update.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.d")
	if err != nil || len(files) < 12 {
		t.Fatalf("want at least 12 bad files, have %d (%v)", len(files), err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(strings.TrimSuffix(name, ".d"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			provs, err := Parse(name, src)
			if err == nil {
				t.Fatalf("Parse succeeded, want an error")
			}
			if provs != nil {
				t.Errorf("Parse returned providers along with an error: %v", provs)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList", err)
			}
			checkErrorList(t, list)
			for _, e := range list {
				if e.Hint == "" && e.Msg != "too many errors" {
					t.Errorf("%v: no hint", e.Pos)
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".d") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// checkErrorList checks what every error list promises, whatever the input.
func checkErrorList(t *testing.T, list ErrorList) {
	t.Helper()
	if len(list) == 0 || len(list) > diag.MaxErrors+1 {
		t.Errorf("error list has %d entries, want 1 to %d", len(list), diag.MaxErrors+1)
	}
	for i, e := range list {
		if e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
			t.Errorf("malformed error %#v", e)
		}
		if i == 0 {
			continue
		}
		if prev := list[i-1].Pos; e.Pos.Line < prev.Line || e.Pos.Line == prev.Line && e.Pos.Col < prev.Col {
			t.Errorf("errors not sorted: %v after %v", e.Pos, prev)
		}
	}
}

func TestErrorText(t *testing.T) {
	e1 := &Error{Pos: Pos{File: "a.d", Line: 3, Col: 7}, Msg: "unknown type pid_t", Hint: "declare it"}
	e2 := &Error{Pos: Pos{Line: 4, Col: 1}, Msg: "no hint here"}
	if got, want := e1.Error(), "a.d:3:7: unknown type pid_t\n\thint: declare it"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := e2.Error(), "4:1: no hint here"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (ErrorList{e1, e2}).Error(), "a.d:3:7: unknown type pid_t\n\thint: declare it\n4:1: no hint here"; got != want {
		t.Errorf("ErrorList.Error() = %q, want %q", got, want)
	}
}

// TestErrorIsNilInterface guards against returning a typed nil ErrorList,
// which would make err != nil true for a good file.
func TestErrorIsNilInterface(t *testing.T) {
	_, err := Parse("test.d", []byte("provider p { probe a(); };"))
	if err != nil {
		t.Fatalf("err = %#v, want nil", err)
	}
}

func TestTooManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("provider p {\n")
	for range 30 {
		b.WriteString("\tprobe a(nosuchtype);\n")
	}
	b.WriteString("};\n")
	_, err := Parse("test.d", []byte(b.String()))
	list, ok := err.(ErrorList)
	if !ok || len(list) != diag.MaxErrors+1 || list[diag.MaxErrors].Msg != "too many errors" {
		t.Fatalf("got %v", err)
	}
}

func dump(provs []Provider) string {
	var b strings.Builder
	for _, p := range provs {
		b.WriteString(p.Name + " " + p.Pos.String() + "\n")
		for _, pr := range p.Probes {
			b.WriteString("\t" + pr.Provider + "." + pr.Name + " " + pr.Pos.String() + " [")
			for i, a := range pr.Args {
				if i > 0 {
					b.WriteString(", ")
				}
				ct := "?"
				if i < len(pr.ArgTypes) {
					ct = pr.ArgTypes[i]
				}
				b.WriteString(a.Name + " " + a.Kind.String() + " " + ct)
			}
			b.WriteString("]\n")
		}
	}
	return b.String()
}
