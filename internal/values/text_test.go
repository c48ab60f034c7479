package values_test

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/testing/valuestest"
	"github.com/go-usdt/usdt/internal/values"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{`quotes " and \ stay`, `quotes " and \ stay`},
		{"Zürich ✓ 東京", "Zürich ✓ 東京"},
		{"U+FFFD itself: \uFFFD", "U+FFFD itself: \uFFFD"},
		{"TZif2\x00\x00\x00", `TZif2\x00\x00\x00`},
		{"a\tb\nc\rd\x7f", `a\tb\nc\rd\x7f`},
		{"caf\xe9", `caf\xe9`},
		{"\xff\xfe", `\xff\xfe`},
		// A character cut in two, as a string read in part is.
		{"ab\xc3", `ab\xc3`},
		{"\u0085 and \u2028", `\u0085 and \u2028`},
		// Terminal escape sequences, as a hostile binary's probe names
		// may hold them: a CSI that clears the screen, an OSC that sets
		// the window's title, ended by BEL or by ST, and CSI as the
		// one C1 character, valid UTF-8 or a bare byte.
		{"\x1b[2J", `\x1b[2J`},
		{"\x1b]0;pwned\a", `\x1b]0;pwned\a`},
		{"\x1b]0;pwned\x1b\\", `\x1b]0;pwned\x1b\`},
		{"\u009b31m and \x9b31m", `\u009b31m and \x9b31m`},
		{"\b\f\v", `\b\f\v`},
	}
	for _, tt := range tests {
		got := values.Escape(tt.in)
		if got != tt.want {
			t.Errorf("Escape(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if !utf8.ValidString(got) || strings.ContainsFunc(got, func(r rune) bool { return r < ' ' || r >= 0x7f && r < 0xa0 }) {
			t.Errorf("Escape(%q) = %q: invalid UTF-8 or control characters", tt.in, got)
		}
	}
}

func TestEscapeLines(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"one line", "one line"},
		{"probe table in .noptrdata: bad\n\thint: rebuild it", "probe table in .noptrdata: bad\n\thint: rebuild it"},
		{"section \x1b]0;pwned\a\x1b[2J: bad\n\t\x9b31m\r\n", "section \\x1b]0;pwned\\a\\x1b[2J: bad\n\t\\x9b31m\\r\n"},
	}
	for _, tt := range tests {
		if got := values.EscapeLines(tt.in); got != tt.want {
			t.Errorf("EscapeLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

type tzData struct {
	P    []byte
	Name string
}

type failure struct{ Err error }

// TestDecodeBadBytes decodes values whose strings, []byte and map keys
// hold bytes that are not valid UTF-8 and control characters, read from
// this process's memory as the tracer reads a traced program's: their
// text escapes them as %q does, and their JSON is valid, holding each
// string as it is where it is valid UTF-8 (encoding/json escapes its
// control characters) and escaped where it is not.
func TestDecodeBadBytes(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := values.NewTypeNames(f)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", values.StringMax-1) + "é!"
	tests := []struct {
		name string
		v    any
		text string
		json string
	}{
		{
			// A time zone file, as time.(*dataIO).read holds it.
			name: "bytes with NULs", v: tzData{[]byte("TZif2\x00\x00\x00"), "Europe/Paris"},
			text: `{P:TZif2\x00\x00\x00 Name:Europe/Paris}`,
			json: `{"P":"TZif2\u0000\u0000\u0000","Name":"Europe/Paris"}`,
		},
		{
			name: "invalid UTF-8", v: tzData{[]byte("caf\xe9"), "ok\xff\n"},
			text: `{P:caf\xe9 Name:ok\xff\n}`,
			json: `{"P":"caf\\xe9","Name":"ok\\xff\\n"}`,
		},
		{
			// The probe reads 64 bytes, the first of é's two among them.
			name: "cut inside a character", v: tzData{nil, long},
			text: `{P:[] Name:` + long[:values.StringMax-1] + `\xc3...(66 bytes)}`,
			json: `{"P":null,"Name":"` + long[:values.StringMax-1] + `\\xc3...(66 bytes)"}`,
		},
		{
			// A []byte argument or result: quoted, as a string argument
			// is, where bare its ", " would end the value in an event.
			name: "bytes argument", v: []byte("caf\xe9, \"ok\"\n"),
			text: `"caf\xe9, \"ok\"\n"`,
			json: `"caf\\xe9, \"ok\"\\n"`,
		},
		{
			name: "bytes argument cut", v: []byte(long),
			text: `"` + long[:values.StringMax-1] + `\xc3"...(66 bytes)`,
			json: `"` + long[:values.StringMax-1] + `\\xc3...(66 bytes)"`,
		},
		{name: "nil bytes argument", v: []byte(nil), text: `[]`, json: `null`},
		{name: "ints argument", v: []int{7, -8, 9}, text: `[7 -8 9]`, json: `[7,-8,9]`},
		{
			// Keys sorted by their bytes, as fmt sorts them.
			name: "map keys", v: map[string]int{"\xff": 1, "a\tb": 2, "é": 3},
			text: `map[a\tb:2 é:3 \xff:1]`,
			json: `{"\\xff":1,"a\tb":2,"é":3}`,
		},
		{
			name: "error message", v: failure{errors.New("bad \xff\x01")},
			text: `{Err:bad \xff\x01}`,
			json: `{"Err":"bad \\xff\\x01"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink = append(sink, tt.v)
			typ := reflect.TypeOf(tt.v)
			l := valuestest.Layout(typ)
			// The value's address, as the probe passes a struct, or the
			// map itself: the data word of the interface holding it.
			raw := uint64(uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&sink[len(sink)-1]))[1]))
			info, _ := debug.ReadBuildInfo()
			p := values.NewPlan([]*layout.Type{l}, values.MapGroupsOf(info))
			area, err := valuestest.Read(p, []uint64{raw})
			if err != nil {
				t.Skipf("cannot read this process's memory: %v", err)
			}
			v, ok := p.Decode(0, l, raw, area, names.Type)
			if !ok {
				t.Fatal("the plan reads nothing of the value")
			}
			if got := v.String(); got != tt.text {
				t.Errorf("text %s, want %s", got, tt.text)
			}
			got, err := json.Marshal(v.JSON())
			if err != nil {
				t.Fatal(err)
			}
			if fast, err := values.AppendJSON(nil, v); err != nil || string(fast) != string(got) {
				t.Errorf("AppendJSON: %s (%v), encoding/json %s", fast, err, got)
			}
			if !json.Valid(got) || !utf8.Valid(got) {
				t.Errorf("JSON %q is not valid", got)
			}
			var g, w any
			if err := json.Unmarshal([]byte(tt.json), &w); err != nil {
				t.Fatalf("the test's JSON %s: %v", tt.json, err)
			}
			json.Unmarshal(got, &g)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("JSON %s, want %s", got, tt.json)
			}
		})
	}
}
