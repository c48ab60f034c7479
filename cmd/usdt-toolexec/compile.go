package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-usdt/usdt/internal/usdtgen"
)

// compile runs the compiler. A package holding usdtgen's no-cgo file gets
// one more file that defines the sentinel that file refers to: this wrapper
// will write the notes at link time, so the build may go on.
func compile(opt options, tool string, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if !strings.HasSuffix(a, usdtgen.NoCgoSuffix) {
			continue
		}
		extra, err := writeSentinel(a, flagValue(args, "o"))
		if err != nil {
			return err
		}
		if opt.verbose {
			fmt.Fprintf(stderr, "usdt-toolexec: %s: usdtgen probes, notes written at link\n", flagValue(args, "p"))
		}
		args = append(args, extra)
		break
	}
	return runTool(tool, args, stdout, stderr)
}

// writeSentinel writes the defining file next to the compiler's output, in
// the package's private work directory, whose path the go command already
// trims out of everything the compiler records.
func writeSentinel(generated, output string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), generated, nil, parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	if output == "" {
		return "", fmt.Errorf("compile of %s has no -o", generated)
	}
	path := filepath.Join(filepath.Dir(output), "usdt_toolexec_sentinel.go")
	src := fmt.Sprintf("package %s\n\nconst %s = 0\n", f.Name.Name, usdtgen.Sentinel)
	return path, os.WriteFile(path, []byte(src), 0o644)
}
