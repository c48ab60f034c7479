package rewrite

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/rules"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGolden instruments testdata/split/input.go with its rules.yml for
// each architecture and compares the rewritten file, the generated Go
// file and the assembly with the golden files, then compiles them with
// the toolchain's compile and asm.
func TestGolden(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "split"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := rules.Load(filepath.Join(dir, "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			out := t.TempDir()
			res, err := Package(Config{
				ImportPath: "example.com/shop",
				Files:      []string{filepath.Join(dir, "input.go")},
				GOARCH:     arch,
				Rules:      r,
				GoidOffset: 152,
				OutDir:     out,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res == nil || len(res.Files) != 2 {
				t.Fatalf("Package returned %+v, want a rewritten file and a generated one", res)
			}
			got := map[string][]byte{"usdt_auto_probes_" + arch + ".s": res.Asm}
			for _, f := range res.Files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				// The line directive names the input by its absolute path.
				got[filepath.Base(f)] = bytes.ReplaceAll(b, []byte(dir), []byte("$DIR"))
			}
			for name, b := range got {
				if arch != "amd64" && strings.HasSuffix(name, ".go") {
					continue // the Go files are the same for every GOARCH
				}
				golden := filepath.Join(dir, "golden", name+".golden")
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, b, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -update)", err)
				}
				if !bytes.Equal(b, want) {
					t.Errorf("%s differs from %s (run go test -update to rewrite it):\n%s", name, golden, b)
				}
			}
			compile(t, arch, out, res)
		})
	}
}

// compile builds the package the way usdt-toolexec's compile step does.
func compile(t *testing.T, arch, out string, res *Result) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	asm := filepath.Join(out, "usdt_auto_probes.s")
	if err := os.WriteFile(asm, res.Asm, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goTool, append([]string{"tool"}, args...)...)
		cmd.Env = append(os.Environ(), "GOARCH="+arch, "GOOS=linux")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go tool %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	symabis := filepath.Join(out, "symabis")
	run("asm", "-p", "example.com/shop", "-gensymabis", "-o", symabis, asm)
	run(append([]string{"compile", "-p", "example.com/shop", "-symabis", symabis, "-o", filepath.Join(out, "go.o")}, res.Files...)...)
	run("asm", "-p", "example.com/shop", "-o", filepath.Join(out, "asm.o"), asm)
}
