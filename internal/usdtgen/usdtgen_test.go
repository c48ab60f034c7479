package usdtgen

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/provider"
)

func TestExportedName(t *testing.T) {
	tests := []struct {
		provider, probe, want string
	}{
		{"shop", "order__placed", "ShopOrderPlaced"},
		{"shop", "gc", "ShopGc"},
		{"shop_db", "query__start", "ShopDbQueryStart"},
		{"jobs", "job__enqueued", "JobsJobEnqueued"},
		// Leading, trailing and repeated underscores vanish.
		{"_app", "_start", "AppStart"},
		{"app_", "start_", "AppStart"},
		{"app", "a___b", "AppAB"},
		{"__app__", "__", "App"},
		// Digits stay, and an underscore before one leaves it lower case.
		{"app", "v2", "AppV2"},
		{"app", "x86_64", "AppX8664"},
		{"http2", "h2_frame", "Http2H2Frame"},
		{"app", "_2fa", "App2fa"},
		// Case is kept, apart from each first letter.
		{"HTTP", "getURL", "HTTPGetURL"},
		{"myApp", "camelCase", "MyAppCamelCase"},
		// Names Generate has to reject: no letter in front.
		{"_9", "x", "9X"},
		{"_", "_", ""},
	}
	for _, tt := range tests {
		if got := ExportedName(tt.provider, tt.probe); got != tt.want {
			t.Errorf("ExportedName(%q, %q) = %q, want %q", tt.provider, tt.probe, got, tt.want)
		}
	}
}

func TestParamName(t *testing.T) {
	tests := []struct {
		name string
		i    int
		used []string
		want string
	}{
		{"id", 0, nil, "id"},
		{"wait_ns", 3, nil, "wait_ns"},
		// Keywords, the names generated bodies use, and blanks.
		{"type", 2, nil, "arg2"},
		{"func", 0, nil, "arg0"},
		{"range", 11, nil, "arg11"},
		{"C", 1, nil, "arg1"},
		{"unsafe", 4, nil, "arg4"},
		{"usdtrt", 0, nil, "arg0"},
		{"usdtBuf0", 5, nil, "arg5"},
		{"usdt", 0, nil, "arg0"},
		{"_", 7, nil, "arg7"},
		{"", 1, nil, "arg1"},
		{"not-go", 2, nil, "arg2"},
		// Predeclared identifiers may be shadowed: the bodies never use them.
		{"string", 0, nil, "string"},
		{"len", 0, nil, "len"},
		// Still unique when a fallback meets a name already taken.
		{"type", 1, []string{"arg1"}, "arg1_"},
		{"arg1", 1, []string{"arg1", "arg1_"}, "arg1__"},
		{"c", 0, []string{"C"}, "c"},
	}
	for _, tt := range tests {
		used := map[string]bool{}
		for _, u := range tt.used {
			used[u] = true
		}
		got := paramName(tt.name, tt.i, used)
		if got != tt.want {
			t.Errorf("paramName(%q, %d, %q) = %q, want %q", tt.name, tt.i, tt.used, got, tt.want)
		}
		if !used[got] {
			t.Errorf("paramName(%q, %d, %q) did not record %q as used", tt.name, tt.i, tt.used, got)
		}
	}
}

// parse parses src as the provider file name, failing the test on errors.
func parse(t *testing.T, name, src string) []provider.Provider {
	t.Helper()
	provs, err := provider.Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("parsing %s: %v", name, err)
	}
	return provs
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		pos       provider.Pos
		msg, hint string
	}{
		{
			name: "same name in one provider",
			src: `provider app {
	probe req_start();
	probe req__start(int n);
};`,
			pos:  provider.Pos{File: "ids.d", Line: 3, Col: 8},
			msg:  "probe app:req__start needs the Go function AppReqStart, already generated for the probe at 2:8",
			hint: "rename one of the probes",
		},
		{
			name: "same name across providers",
			src: `provider shop_db { probe query(); };
provider shop { probe db_query(); };`,
			pos: provider.Pos{File: "ids.d", Line: 2, Col: 23},
			msg: "probe shop:db_query needs the Go function ShopDbQuery, already generated for the probe at 1:26",
		},
		{
			name: "probe named after another's Enabled check",
			src: `provider app {
	probe start();
	probe start_enabled();
};`,
			pos: provider.Pos{File: "ids.d", Line: 3, Col: 8},
			msg: "probe app:start_enabled needs the Go function AppStartEnabled, already generated for the probe at 2:8",
		},
		{
			name: "Enabled check named after an earlier probe",
			src: `provider app {
	probe start_enabled();
	probe start();
};`,
			pos: provider.Pos{File: "ids.d", Line: 3, Col: 8},
			msg: "probe app:start needs the Go function AppStartEnabled, already generated for the probe at 2:8",
		},
		{
			name: "digit in front",
			src:  "provider _1 { probe x(); };",
			pos:  provider.Pos{File: "ids.d", Line: 1, Col: 21},
			msg:  `probe _1:x has no usable Go name ("1X")`,
			hint: "start the provider or the probe name with a letter",
		},
		{
			name: "nothing left",
			src:  "provider _ {\n probe __();\n};",
			pos:  provider.Pos{File: "ids.d", Line: 2, Col: 8},
			msg:  `probe _:__ has no usable Go name ("")`,
		},
		{
			name: "cgo's pseudo-package",
			src:  "provider c { probe _(); };",
			pos:  provider.Pos{File: "ids.d", Line: 1, Col: 20},
			msg:  `probe c:_ has no usable Go name ("C")`,
			hint: "C is cgo's pseudo-package",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := Generate(Config{Source: "ids.d", Providers: parse(t, "ids.d", tt.src), Package: "p"})
			if files != nil {
				t.Errorf("Generate returned %d files along with its error", len(files))
			}
			var gerr *Error
			if !errors.As(err, &gerr) {
				t.Fatalf("Generate error = %v (%T), want *Error", err, err)
			}
			if gerr.Pos != tt.pos {
				t.Errorf("Pos = %+v, want %+v", gerr.Pos, tt.pos)
			}
			if gerr.Msg != tt.msg {
				t.Errorf("Msg = %q\nwant  %q", gerr.Msg, tt.msg)
			}
			if gerr.Hint == "" || !strings.Contains(gerr.Hint, tt.hint) {
				t.Errorf("Hint = %q, want one containing %q", gerr.Hint, tt.hint)
			}
			want := tt.pos.String() + ": " + gerr.Msg + "\n\thint: " + gerr.Hint
			if err.Error() != want {
				t.Errorf("Error() = %q\nwant      %q", err.Error(), want)
			}
		})
	}
}

func TestErrorWithoutHint(t *testing.T) {
	err := &Error{Pos: provider.Pos{File: "a.d", Line: 3, Col: 9}, Msg: "bad"}
	if got, want := err.Error(), "a.d:3:9: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestGenerateNoProbes(t *testing.T) {
	for _, provs := range [][]provider.Provider{nil, {{Name: "empty"}}} {
		files, err := Generate(Config{Source: "none.d", Providers: provs, Package: "p"})
		if err == nil || files != nil || !strings.Contains(err.Error(), "none.d: no probes") {
			t.Errorf("Generate(%v) = %d files, %v; want a no probes error", provs, len(files), err)
		}
	}
}

// TestGenerateParamCollision drives paramName's last resort through
// Generate: the parser never passes an argN out of place, but a Config
// built by hand may.
func TestGenerateParamCollision(t *testing.T) {
	provs := []provider.Provider{{Name: "app", Probes: []provider.Probe{{
		Probe: probe.Probe{Provider: "app", Name: "p", Args: []probe.Arg{
			{Name: "arg1", Kind: probe.Int32},
			{Name: "type", Kind: probe.String},
		}},
		Pos: provider.Pos{File: "x.d", Line: 1, Col: 1},
	}}}}
	files, err := Generate(Config{Source: "x.d", Providers: provs, Package: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == "x_usdt_other.go" && !bytes.Contains(f.Data, []byte("func AppP(arg1 int32, arg1_ string) {}")) {
			t.Errorf("parameters not renamed apart:\n%s", f.Data)
		}
	}
}

// TestGenerateDeterministic checks that output depends on the provider
// file's base name, not on where it is, and is the same on every run.
func TestGenerateDeterministic(t *testing.T) {
	src := "provider app { probe start(int n, const char *s); };"
	gen := func(source, importPath string) []File {
		files, err := Generate(Config{Source: source, Providers: parse(t, "app.d", src), Package: "p", ImportPath: importPath})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	a := gen("app.d", "example.com/p")
	for _, b := range [][]File{gen("app.d", "example.com/p"), gen("/some/where/app.d", "example.com/p"), gen("sub/app.d", "example.com/p")} {
		if len(a) != len(b) {
			t.Fatalf("%d files, then %d", len(a), len(b))
		}
		for i := range a {
			if a[i].Name != b[i].Name || !bytes.Equal(a[i].Data, b[i].Data) {
				t.Errorf("%s differs between runs", a[i].Name)
			}
		}
	}
}

// TestImportPathOnlyRenamesCSymbols checks that the import path changes
// the C symbols of the cgo route, which share one namespace per binary,
// and nothing else.
func TestImportPathOnlyRenamesCSymbols(t *testing.T) {
	src := "provider app { probe start(int n); };"
	gen := func(importPath string) map[string][]byte {
		files, err := Generate(Config{Source: "app.d", Providers: parse(t, "app.d", src), Package: "p", ImportPath: importPath})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]byte{}
		for _, f := range files {
			m[f.Name] = f.Data
		}
		return m
	}
	a, b := gen("example.com/a"), gen("example.com/b")
	for name, data := range a {
		cgo := strings.Contains(name, "_usdt_cgo")
		if same := bytes.Equal(data, b[name]); same == cgo {
			t.Errorf("%s: same for both import paths = %v", name, same)
		}
	}
}
