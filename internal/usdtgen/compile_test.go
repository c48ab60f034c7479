package usdtgen

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/gomod"
	"github.com/go-usdt/usdt/internal/probe"
)

// repoRoot is the directory of this module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if gomod.ImportPath(root) != "github.com/go-usdt/usdt" {
		t.Fatalf("%s is not the root of github.com/go-usdt/usdt", root)
	}
	return root
}

// probeCalls returns Go statements that call every exported function of a
// generated file, with an argument of the right type for each parameter.
func probeCalls(t *testing.T, pkg string, src []byte) (calls []string, probes int) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !fd.Name.IsExported() {
			continue
		}
		if fd.Type.Results != nil {
			calls = append(calls, fmt.Sprintf("_ = %s.%s()", pkg, fd.Name.Name))
			continue
		}
		probes++
		var args []string
		for _, field := range fd.Type.Params.List {
			var arg string
			switch typ := types(field.Type); typ {
			case "string":
				arg = `"value"`
			case "bool":
				arg = "true"
			case "unsafe.Pointer":
				arg = "nil"
			default:
				arg = typ + "(1)"
			}
			for range max(1, len(field.Names)) {
				args = append(args, arg)
			}
		}
		calls = append(calls, fmt.Sprintf("%s.%s(%s)", pkg, fd.Name.Name, strings.Join(args, ", ")))
	}
	return calls, probes
}

func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return types(e.X) + "." + e.Sel.Name
	}
	panic(fmt.Sprintf("unexpected parameter type %T", e))
}

// stapsdtNotes returns "provider:name args" for every stapsdt note of an
// ELF file, and whether every note names a semaphore.
func stapsdtNotes(t *testing.T, path string) (notes []string, semaphores bool) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".note.stapsdt")
	if sec == nil {
		return nil, false
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	semaphores = true
	for len(data) >= 12 {
		namesz := int(binary.LittleEndian.Uint32(data))
		descsz := int(binary.LittleEndian.Uint32(data[4:]))
		name := data[12 : 12+namesz]
		desc := data[12+(namesz+3)&^3:][:descsz]
		data = data[12+(namesz+3)&^3+(descsz+3)&^3:]
		if string(name) != "stapsdt\x00" || len(desc) < 24 {
			t.Fatalf("%s: malformed stapsdt note", path)
		}
		if binary.LittleEndian.Uint64(desc[16:]) == 0 {
			semaphores = false
		}
		s := bytes.Split(desc[24:], []byte{0})
		notes = append(notes, fmt.Sprintf("%s:%s %s", s[0], s[1], s[2]))
	}
	return notes, semaphores
}

// TestGeneratedCodeCompiles builds every golden case on every route: cgo
// (type-checked by vet, assembled, linked and run, and its notes read back),
// no cgo on each architecture (vet's asmdecl checks the Plan9 frames against
// the Go declarations), and platforms without USDT.
func TestGeneratedCodeCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds several programs")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root := repoRoot(t)
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	hostCgo := runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64")
	if _, err := exec.LookPath("gcc"); err != nil {
		hostCgo = false
	}

	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pkgDir := filepath.Join(dir, "probes")
			if err := os.Mkdir(pkgDir, 0o755); err != nil {
				t.Fatal(err)
			}
			var calls []string
			probes := 0
			for _, f := range generateCase(t, name) {
				if err := os.WriteFile(filepath.Join(pkgDir, f.Name), f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(f.Name, "_usdt_other.go") {
					calls, probes = probeCalls(t, "probes", f.Data)
				}
			}
			gomod := fmt.Sprintf("module example.com/m\n\ngo 1.25.0\n\nrequire github.com/go-usdt/usdt v0.0.0\n\nreplace github.com/go-usdt/usdt => %s\n", root)
			mainGo := fmt.Sprintf(`package main

import (
	"fmt"

	"example.com/m/probes"
	usdtrt "github.com/go-usdt/usdt/runtime"
)

func main() {
	%s
	for _, p := range usdtrt.Probes() {
		fmt.Println(p.Provider, p.Name, p.Enabled)
	}
}
`, strings.Join(calls, "\n\t"))
			for file, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": gosum, "main.go": []byte(mainGo)} {
				if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}

			gocmd := func(env []string, args ...string) (string, error) {
				cmd := exec.CommandContext(t.Context(), goCmd, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=readonly")
				cmd.Env = append(cmd.Env, env...)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			run := func(env []string, args ...string) bool {
				t.Helper()
				out, err := gocmd(env, args...)
				if err != nil {
					t.Errorf("%s go %s: %v\n%s", strings.Join(env, " "), strings.Join(args, " "), err, out)
					return false
				}
				return true
			}
			// runBinary runs a program built for the host and checks that
			// every probe registered itself and is disabled.
			runBinary := func(bin string) {
				t.Helper()
				out, err := exec.CommandContext(t.Context(), bin).CombinedOutput()
				if err != nil {
					t.Errorf("%s: %v\n%s", bin, err, out)
					return
				}
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				if len(lines) != probes {
					t.Errorf("%s registered %d probes, want %d:\n%s", bin, len(lines), probes, out)
				}
				for _, l := range lines {
					if !strings.HasSuffix(l, " false") {
						t.Errorf("%s: probe enabled without a tracer: %s", bin, l)
					}
				}
			}

			// Without the name usdt-toolexec defines, a build without cgo
			// must fail and say why.
			noCgo := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}
			if out, err := gocmd(noCgo, "build", "-o", os.DevNull, "."); err == nil || !strings.Contains(out, "undefined: "+probe.Sentinel) {
				t.Errorf("building without cgo or usdt-toolexec: err=%v, want undefined: %s\n%s", err, probe.Sentinel, out)
			}
			sentinel := fmt.Sprintf("package probes\n\n// Defined by usdt-toolexec in real builds.\nconst %s = 0\n", probe.Sentinel)
			if err := os.WriteFile(filepath.Join(pkgDir, "sentinel.go"), []byte(sentinel), 0o644); err != nil {
				t.Fatal(err)
			}

			for _, arch := range []string{"amd64", "arm64"} {
				env := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch}
				if !run(env, "vet", "./...") {
					continue
				}
				bin := filepath.Join(dir, "nocgo-"+arch)
				if run(env, "build", "-o", bin, ".") && arch == runtime.GOARCH && runtime.GOOS == "linux" {
					runBinary(bin)
				}
			}
			for _, env := range [][]string{
				{"CGO_ENABLED=0", "GOOS=darwin", "GOARCH=arm64"},
				{"CGO_ENABLED=0", "GOOS=darwin", "GOARCH=amd64"},
				{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=riscv64"},
				{"CGO_ENABLED=0", "GOOS=windows", "GOARCH=amd64"},
			} {
				run(env, "vet", "./...")
			}

			if !hostCgo {
				t.Log("skipping the cgo route: needs linux/amd64 or linux/arm64 with gcc")
				return
			}
			env := []string{"CGO_ENABLED=1", "GOOS=linux", "GOARCH=" + runtime.GOARCH}
			if !run(env, "vet", "./...") {
				return
			}
			bin := filepath.Join(dir, "cgo")
			if !run(env, "build", "-o", bin, ".") {
				return
			}
			runBinary(bin)
			notes, semaphores := stapsdtNotes(t, bin)
			var want []string
			for _, f := range generateCase(t, name) {
				if f.Name == name+"_usdt_cgo_"+runtime.GOARCH+".S" {
					want = gnuNotes(string(f.Data))
				}
			}
			if strings.Join(notes, "\n") != strings.Join(want, "\n") {
				t.Errorf("stapsdt notes of the cgo build:\n\t%s\nwant\n\t%s", strings.Join(notes, "\n\t"), strings.Join(want, "\n\t"))
			}
			if !semaphores {
				t.Errorf("a stapsdt note of the cgo build has no semaphore")
			}
		})
	}
}

// gnuNotes extracts "provider:name args" from the .asciz triples of a GNU
// assembly file.
func gnuNotes(src string) []string {
	var strs []string
	for _, line := range strings.Split(src, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), ".asciz "); ok && s != `"stapsdt"` {
			strs = append(strs, strings.Trim(s, `"`))
		}
	}
	var notes []string
	for i := 0; i+2 < len(strs); i += 3 {
		notes = append(notes, strs[i]+":"+strs[i+1]+" "+strs[i+2])
	}
	return notes
}
