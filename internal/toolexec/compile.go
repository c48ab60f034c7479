package toolexec

import (
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/go-usdt/usdt/internal/goidoff"
	"github.com/go-usdt/usdt/internal/usdtgen"
	"github.com/go-usdt/usdt/rewrite"
)

// compile runs the compiler, first instrumenting the functions the rules
// select and defining the sentinel of usdtgen's no-cgo files: this wrapper
// writes the notes those need at link time.
func compile(opt Options, tool string, args []string, stdout, stderr io.Writer) error {
	importPath := flagValue(args, "p")
	output := flagValue(args, "o")
	if output == "" {
		return opt.runTool(tool, args, stdout, stderr)
	}
	objdir := filepath.Dir(output)
	for _, a := range args {
		if !strings.HasSuffix(a, usdtgen.NoCgoSuffix) {
			continue
		}
		extra, err := writeSentinel(a, objdir)
		if err != nil {
			return err
		}
		args = append(args, extra)
		break
	}

	r, err := loadRules(opt)
	if err != nil {
		return err
	}
	var files []string
	for _, a := range args {
		if strings.HasSuffix(a, ".go") {
			files = append(files, a)
		}
	}
	matchPath := importPath
	if importPath == "main" {
		matchPath = mainImportPath(files, objdir)
	}
	if r == nil || rewrite.Excluded(matchPath) || !r.MatchPackage(matchPath) {
		return opt.runTool(tool, args, stdout, stderr)
	}
	goarch := os.Getenv("GOARCH")
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	// The tool is $GOROOT/pkg/tool/GOOS_GOARCH/compile.
	goroot := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(tool))))
	cfg := rewrite.Config{
		ImportPath: importPath,
		MatchPath:  matchPath,
		Files:      files,
		ImportCfg:  flagValue(args, "importcfg"),
		GOARCH:     goarch,
		GoVersion:  flagValue(args, "lang"),
		Rules:      r,
		OutDir:     objdir,
	}
	if cfg.GoidOffset, err = goidoff.Offset(goroot, goarch); err != nil {
		return fmt.Errorf("%s: finding the goroutine id in this Go runtime: %w", importPath, err)
	}
	res, err := rewrite.Package(cfg)
	if err != nil {
		return err
	}
	if res == nil {
		return opt.runTool(tool, args, stdout, stderr)
	}
	if res.Skipped != "" {
		if opt.Verbose {
			fmt.Fprintf(stderr, "usdt-toolexec: %s: not instrumented: %s\n", importPath, res.Skipped)
		}
		return opt.runTool(tool, args, stdout, stderr)
	}
	if opt.Verbose {
		for _, fn := range res.Funcs {
			fmt.Fprintf(stderr, "usdt-toolexec: %s.%s: %s %s\n", importPath, fn.Name, fn.Entry, fn.Exit)
			if fn.Traced != "" {
				fmt.Fprintf(stderr, "usdt-toolexec: %s.%s: split: the probes are in %s, which it calls only while traced\n", importPath, fn.Name, fn.Traced)
			}
			if fn.Dropped > 0 {
				fmt.Fprintf(stderr, "usdt-toolexec: %s.%s: %d arguments over the 12-argument limit not passed\n", importPath, fn.Name, fn.Dropped)
			}
		}
	}
	return compileInstrumented(opt, tool, args, files, res, objdir, output, stdout, stderr)
}

// mainImportPath is the import path of the main package being compiled:
// the compiler only gets "main", but rules name main packages by path. The
// go command says it in $TOOLEXEC_IMPORTPATH ("example.com/cmd", or
// "example.com/cmd [example.com/cmd.test]" for its test variant, and
// "example.com/cmd.test" for the generated test main). Without it, the
// directory comes from the files: the go command passes the package's own
// Go files by absolute path, and the files that cgo or cover wrote into
// objdir in their place begin with a //line directive naming the original.
// The test main has neither, and stays "main".
func mainImportPath(files []string, objdir string) string {
	if p, _, _ := strings.Cut(os.Getenv("TOOLEXEC_IMPORTPATH"), " "); p != "" {
		return p
	}
	for _, f := range files {
		src := f
		if filepath.Dir(f) == filepath.Clean(objdir) {
			src = lineDirectiveFile(f)
		}
		if !filepath.IsAbs(src) {
			continue
		}
		if p := usdtgen.ImportPath(filepath.Dir(src)); p != "" {
			return p
		}
		break
	}
	return "main"
}

// lineDirectiveFile returns the file named by a //line directive at the
// start of a line in the first lines of the Go file at path, or "".
func lineDirectiveFile(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	for _, line := range strings.Split(string(head[:n]), "\n") {
		rest, ok := strings.CutPrefix(line, "//line ")
		if !ok {
			continue
		}
		// //line file:line or //line file:line:col
		for range 2 {
			if i := strings.LastIndexByte(rest, ':'); i > 0 && isDigits(rest[i+1:]) {
				rest = rest[:i]
			}
		}
		return rest
	}
	return ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// compileInstrumented compiles the rewritten files, assembles the probe
// stubs and adds them to the package archive. Adding the object directly
// is what lets a cgo package carry Plan9 stubs: the go command's rule
// against assembly in cgo packages applies to source files only.
func compileInstrumented(opt Options, tool string, args, files []string, res *rewrite.Result, objdir, output string, stdout, stderr io.Writer) error {
	toolDir := filepath.Dir(tool)
	asmFile := filepath.Join(objdir, "usdt_auto_probes.s")
	if err := os.WriteFile(asmFile, res.Asm, 0o644); err != nil {
		return err
	}
	asmArgs := []string{"-p", flagValue(args, "p")}
	if tp := flagValue(args, "trimpath"); tp != "" {
		asmArgs = append(asmArgs, "-trimpath", tp)
	}
	for _, a := range args {
		// Position-independent code reaches thread-local storage
		// differently: the stubs must be assembled as the package is.
		if a == "-shared" || a == "-dynlink" {
			asmArgs = append(asmArgs, a)
		}
	}
	symabis := filepath.Join(objdir, "usdt_auto_probes.symabis")
	if err := opt.runTool(filepath.Join(toolDir, "asm"), append(append([]string{}, asmArgs...), "-gensymabis", "-o", symabis, asmFile), stdout, stderr); err != nil {
		return err
	}

	replaced := map[string]bool{}
	for _, f := range files {
		replaced[f] = true
	}
	var newArgs []string
	existingSymabis := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-complete":
			// The package now has assembly (the stubs).
		case a == "-symabis" && i+1 < len(args):
			existingSymabis = args[i+1]
			i++
		case strings.HasPrefix(a, "-symabis="):
			existingSymabis = strings.TrimPrefix(a, "-symabis=")
		case replaced[a]:
		default:
			newArgs = append(newArgs, a)
		}
	}
	if existingSymabis != "" {
		merged, err := mergeFiles(filepath.Join(objdir, "usdt_merged.symabis"), existingSymabis, symabis)
		if err != nil {
			return err
		}
		symabis = merged
	}
	newArgs = append(newArgs, "-symabis", symabis)
	newArgs = append(newArgs, res.Files...)
	if err := opt.runTool(tool, newArgs, stdout, stderr); err != nil {
		return err
	}

	obj := filepath.Join(objdir, "usdt_auto_probes.o")
	if err := opt.runTool(filepath.Join(toolDir, "asm"), append(asmArgs, "-o", obj, asmFile), stdout, stderr); err != nil {
		return err
	}
	return appendToArchive(output, "usdt_probes.o", obj)
}

// appendToArchive adds a member to the package archive the compiler wrote,
// as `go tool pack r` would (that tool is no longer shipped prebuilt). The
// header fields are fixed so that builds stay reproducible.
func appendToArchive(archive, member, obj string) error {
	data, err := os.ReadFile(obj)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(archive, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	magic := make([]byte, 8)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "!<arch>\n" {
		return fmt.Errorf("%s is not an archive", archive)
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	var b []byte
	if end%2 == 1 {
		b = append(b, '\n')
	}
	b = fmt.Appendf(b, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", member, 0, 0, 0, 0o644, len(data))
	b = append(b, data...)
	if len(data)%2 == 1 {
		b = append(b, '\n')
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Close()
}

func mergeFiles(dst string, srcs ...string) (string, error) {
	var all []byte
	for _, s := range srcs {
		data, err := os.ReadFile(s)
		if err != nil {
			return "", err
		}
		all = append(all, data...)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			all = append(all, '\n')
		}
	}
	return dst, os.WriteFile(dst, all, 0o644)
}

// writeSentinel writes the defining file into the package's private work
// directory, whose path the go command already trims out of everything the
// compiler records.
func writeSentinel(generated, objdir string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), generated, nil, parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	path := filepath.Join(objdir, "usdt_toolexec_sentinel.go")
	src := fmt.Sprintf("package %s\n\nconst %s = 0\n", f.Name.Name, usdtgen.Sentinel)
	return path, os.WriteFile(path, []byte(src), 0o644)
}
