// Command usdtgen turns a DTrace provider file into typed Go probe functions.
//
// Put this line in a Go file of the package that fires the probes:
//
//	//go:generate usdtgen provider.d
//
// For probe NAME of provider PROV it writes PROV_NAME-style Go functions
// (ShopOrderPlaced for shop:order__placed) and ...Enabled checks, with the
// assembly that every build route needs. See docs/providers.md for the routes.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-usdt/usdt/internal/gomod"
	"github.com/go-usdt/usdt/internal/provider"
	"github.com/go-usdt/usdt/internal/usdtgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("usdtgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pkg := fs.String("pkg", "", "package name of the generated files (default: $GOPACKAGE, else the package of the Go files in -dir)")
	dir := fs.String("dir", ".", "directory to write the generated files to")
	importPath := fs.String("importpath", "", "import path of that package, which keeps C symbols unique (default: derived from go.mod)")
	verbose := fs.Bool("v", false, "print the files written")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: usdtgen [flags] provider.d\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	if err := generate(fs.Arg(0), *dir, *pkg, *importPath, *verbose, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func generate(source, dir, pkg, importPath string, verbose bool, stdout io.Writer) error {
	src, err := os.ReadFile(source)
	if err != nil {
		return err
	}
	providers, err := provider.Parse(source, src)
	if err != nil {
		return err
	}
	if pkg == "" {
		pkg = os.Getenv("GOPACKAGE")
	}
	if pkg == "" {
		if pkg, err = usdtgen.PackageName(dir); err != nil {
			return err
		}
	}
	if importPath == "" {
		importPath = gomod.ImportPath(dir)
	}
	files, err := usdtgen.Generate(usdtgen.Config{Source: filepath.Base(source), Providers: providers, Package: pkg, ImportPath: importPath})
	if err != nil {
		return err
	}
	changed, err := usdtgen.Write(dir, files)
	if verbose {
		for _, name := range changed {
			fmt.Fprintln(stdout, filepath.Join(dir, name))
		}
	}
	return err
}
