package usdtgen

import (
	"bytes"
	"flag"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/provider"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenCases are the provider files under testdata whose generated output
// is kept in testdata/golden/<case>.
var goldenCases = []string{"alltypes", "multi", "edge", "strings"}

// generateCase parses testdata/<name>.d and generates its files the way the
// usdtgen command would for package probes at example.com/probes/<name>.
func generateCase(t *testing.T, name string) []File {
	t.Helper()
	path := filepath.Join("testdata", name+".d")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	provs, err := provider.Parse(filepath.Base(path), src)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	files, err := Generate(Config{
		Source:     path, // Generate must reduce it to the base name
		Providers:  provs,
		Package:    "probes",
		ImportPath: "example.com/probes/" + name,
	})
	if err != nil {
		t.Fatalf("Generate(%s): %v", path, err)
	}
	return files
}

// wantFileNames is the set and order of files Generate returns for base.
func wantFileNames(base string) []string {
	return []string{
		base + "_usdt_amd64.s",
		base + "_usdt_arm64.s",
		base + "_usdt_cgo_amd64.S",
		base + "_usdt_cgo_arm64.S",
		base + "_usdt_nocgo.go",
		base + "_usdt_cgo.go",
		base + "_usdt_other.go",
	}
}

func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			files := generateCase(t, name)
			var names []string
			for _, f := range files {
				names = append(names, f.Name)
			}
			if want := wantFileNames(name); !slices.Equal(names, want) {
				t.Fatalf("generated files\n\t%q\nwant\n\t%q", names, want)
			}

			dir := filepath.Join("testdata", "golden", name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for _, f := range files {
					if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var golden []string
			for _, e := range entries {
				golden = append(golden, e.Name())
			}
			slices.Sort(names)
			if !slices.Equal(golden, names) {
				t.Errorf("%s holds\n\t%q\nbut Generate returned\n\t%q\n(run go test -update)", dir, golden, names)
			}
			for _, f := range files {
				want, err := os.ReadFile(filepath.Join(dir, f.Name))
				if err != nil {
					t.Error(err)
					continue
				}
				if !bytes.Equal(f.Data, want) {
					t.Errorf("%s differs from %s (run go test -update to rewrite it):\n%s",
						f.Name, filepath.Join(dir, f.Name), firstDiff(want, f.Data))
				}
			}
		})
	}
}

// firstDiff shows the first line where got departs from want.
func firstDiff(want, got []byte) string {
	wl := strings.SplitAfter(string(want), "\n")
	gl := strings.SplitAfter(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n\twant " + strconv.Quote(w) + "\n\tgot  " + strconv.Quote(g)
		}
	}
	return "(no difference in lines)"
}

// TestGeneratedGoIsFormatted checks that every generated Go file is exactly
// what gofmt would make of it, so that generated code never shows up in a
// gofmt -l run.
func TestGeneratedGoIsFormatted(t *testing.T) {
	for _, name := range goldenCases {
		for _, f := range generateCase(t, name) {
			if !strings.HasSuffix(f.Name, ".go") {
				continue
			}
			out, err := format.Source(f.Data)
			if err != nil {
				t.Errorf("%s/%s: %v", name, f.Name, err)
				continue
			}
			if !bytes.Equal(out, f.Data) {
				t.Errorf("%s/%s is not gofmt-clean:\n%s", name, f.Name, firstDiff(out, f.Data))
			}
		}
	}
}

var (
	textRE  = regexp.MustCompile(`(?m)^TEXT ·(\w+)\(SB\), (\d+), \$0-(\d+)$`)
	globlRE = regexp.MustCompile(`(?m)^GLOBL ·(\w+)\(SB\), 16, \$(\d+)$`)
	dataRE  = regexp.MustCompile(`(?m)^DATA ·(\w+)\+(\d+)\(SB\)/8, \$(.*)$`)
	tableRE = regexp.MustCompile(`(?s)var (\w+) struct \{\s*header\s+\[3\]uint64\s+semaphores\s+\[(\d+)\]uint16\s+tail\s+\[(\d+)\]uint64\s*\}`)
)

// TestPlan9TableMatchesGo checks what go vet cannot: that the probe table
// every Plan9 file assembles has the size of the Go variable declaring it,
// with one DATA word at each 8-byte offset at most, one stub address per
// probe right after the semaphores, and one stub per probe.
func TestPlan9TableMatchesGo(t *testing.T) {
	for _, name := range goldenCases {
		files := generateCase(t, name)
		byName := map[string][]byte{}
		for _, f := range files {
			byName[f.Name] = f.Data
		}
		goSrc := string(byName[name+"_usdt_nocgo.go"])
		m := tableRE.FindStringSubmatch(goSrc)
		if m == nil {
			t.Fatalf("%s: no table declaration in the no-cgo file", name)
		}
		table := m[1]
		slots, _ := strconv.Atoi(m[2])
		tail, _ := strconv.Atoi(m[3])
		goSize := 24 + 2*slots + 8*tail
		probes := strings.Count(goSrc, "\n//go:noescape\n")
		if slots%4 != 0 || slots < probes || slots >= probes+4 {
			t.Errorf("%s: %d semaphore slots for %d probes", name, slots, probes)
		}
		for _, arch := range []string{"amd64", "arm64"} {
			asm := string(byName[name+"_usdt_"+arch+".s"])
			g := globlRE.FindAllStringSubmatch(asm, -1)
			if len(g) != 1 || g[0][1] != table {
				t.Errorf("%s/%s: GLOBL lines %q, want one for %s", name, arch, g, table)
				continue
			}
			if size, _ := strconv.Atoi(g[0][2]); size != goSize {
				t.Errorf("%s/%s: table is %d bytes, the Go declaration %d", name, arch, size, goSize)
			}
			texts := textRE.FindAllStringSubmatch(asm, -1)
			if len(texts) != probes {
				t.Errorf("%s/%s: %d TEXT stubs for %d probes", name, arch, len(texts), probes)
			}
			stubOff := 24 + 2*slots
			seen := map[int]bool{}
			nstubs := 0
			for _, d := range dataRE.FindAllStringSubmatch(asm, -1) {
				off, _ := strconv.Atoi(d[2])
				if d[1] != table || off%8 != 0 || off >= goSize || seen[off] {
					t.Errorf("%s/%s: bad DATA line for offset %d: %q", name, arch, off, d[0])
				}
				seen[off] = true
				if strings.HasPrefix(d[3], "·") {
					i := (off - stubOff) / 8
					if off < stubOff || i >= len(texts) || d[3] != "·"+texts[i][1]+"(SB)" {
						t.Errorf("%s/%s: stub address %q at offset %d", name, arch, d[3], off)
					}
					nstubs++
				} else if off >= 24 && off < stubOff {
					t.Errorf("%s/%s: semaphores must start zero, got %q", name, arch, d[0])
				}
			}
			if nstubs != probes {
				t.Errorf("%s/%s: %d stub addresses for %d probes", name, arch, nstubs, probes)
			}
		}
	}
}
