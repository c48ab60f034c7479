package provider

import (
	"errors"
	gotoken "go/token"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

// FuzzParse checks what every caller relies on, whatever the input: no
// panic, and either an error and nothing else, or providers the code
// generator can use as they are.
func FuzzParse(f *testing.F) {
	for _, tt := range goodTests {
		f.Add([]byte(tt.src))
	}
	for _, pattern := range []string{"testdata/good/*.d", "testdata/bad/*.d"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		provs, err := Parse("fuzz.d", src)
		if err != nil {
			if provs != nil {
				t.Fatalf("providers returned along with an error: %v", err)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList", err)
			}
			checkErrorList(t, list)
			return
		}
		if len(provs) == 0 {
			t.Fatal("no error and no provider")
		}
		provNames := map[string]bool{}
		for _, p := range provs {
			if !probe.ValidName(p.Name) || provNames[p.Name] {
				t.Fatalf("bad or duplicate provider name %q", p.Name)
			}
			provNames[p.Name] = true
			probeNames := map[string]bool{}
			for _, pr := range p.Probes {
				if pr.Provider != p.Name || !probe.ValidName(pr.Name) || probeNames[pr.Name] {
					t.Fatalf("bad probe %q.%q in provider %q", pr.Provider, pr.Name, p.Name)
				}
				probeNames[pr.Name] = true
				if len(pr.Args) > probe.MaxArgs || len(pr.ArgTypes) != len(pr.Args) {
					t.Fatalf("probe %s: %d args, %d arg types", pr.Name, len(pr.Args), len(pr.ArgTypes))
				}
				argNames := map[string]bool{}
				for _, a := range pr.Args {
					if a.Kind < probe.Int8 || a.Kind > probe.Pointer {
						t.Fatalf("probe %s: invalid kind %v", pr.Name, a.Kind)
					}
					if !gotoken.IsIdentifier(a.Name) || a.Name == "_" || argNames[a.Name] {
						t.Fatalf("probe %s: bad or duplicate argument name %q", pr.Name, a.Name)
					}
					argNames[a.Name] = true
				}
			}
		}
	})
}
