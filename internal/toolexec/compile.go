package toolexec

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/go-usdt/usdt/asmgen"
	"github.com/go-usdt/usdt/internal/goidoff"
	"github.com/go-usdt/usdt/internal/gomod"
	"github.com/go-usdt/usdt/internal/inlining"
	"github.com/go-usdt/usdt/internal/objcache"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/providerring"
	"github.com/go-usdt/usdt/rewrite"
	"github.com/go-usdt/usdt/rules"
)

// compileFlags are the compiler's arguments this wrapper reads.
type compileFlags struct {
	pkg       string // -p, the symbol prefix: "main" for a command
	output    string // -o, the package archive
	importCfg string
	lang      string
	trimpath  string
	symabis   string
	// pic holds -shared and -dynlink: position-independent code reaches
	// thread-local storage differently, so the stubs must be assembled
	// as the package is.
	pic     []string
	goFiles []string
}

func parseCompileFlags(args []string) compileFlags {
	f := compileFlags{
		pkg:       flagValue(args, "p"),
		output:    flagValue(args, "o"),
		importCfg: flagValue(args, "importcfg"),
		lang:      flagValue(args, "lang"),
		trimpath:  flagValue(args, "trimpath"),
		symabis:   flagValue(args, "symabis"),
	}
	for _, a := range args {
		switch {
		case a == "-shared" || a == "-dynlink":
			f.pic = append(f.pic, a)
		case strings.HasSuffix(a, ".go"):
			f.goFiles = append(f.goFiles, a)
		}
	}
	return f
}

// compile runs the compiler, first instrumenting the functions the rules
// select and defining the sentinel of usdtgen's no-cgo files: this wrapper
// writes the notes those need at link time.
func (inv Invocation) compile() error {
	args, f := inv.Args, parseCompileFlags(inv.Args)
	if f.output == "" {
		return inv.run(inv.Tool, args...)
	}
	objdir := filepath.Dir(f.output)
	for _, a := range f.goFiles {
		if !strings.HasSuffix(a, probe.NoCgoSuffix) {
			continue
		}
		extra, err := writeSentinel(a, objdir)
		if err != nil {
			return err
		}
		args, f.goFiles = append(args, extra), append(f.goFiles, extra)
		break
	}
	matchPath := f.pkg
	if f.pkg == "main" {
		matchPath = mainImportPath(f.goFiles, objdir)
	}
	r := inv.Rules
	instrument := r != nil && !rewrite.Excluded(matchPath) && r.MatchPackage(matchPath)
	goarch := os.Getenv("GOARCH")
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	provider := asmgen.RingArch(asmgen.Arch(goarch)) && providerring.Has(f.goFiles, nil)
	if !instrument && !provider {
		return inv.plain(args)
	}
	// Instrumenting a package allocates 10 to 60 MB, most of it garbage
	// and all of it gone when the process ends after the compiler's:
	// collecting it from the runtime's first small heap goals took a
	// third of the wrapper's time (six large packages, three runs each:
	// 0.79 s of CPU collecting, 0.54 s not), for a few MB more of peak
	// memory (net/http: 40 to 48 MB, beside the compiler's 210). Under a
	// bound, for packages far larger.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(256 << 20)
	// The tool is $GOROOT/pkg/tool/GOOS_GOARCH/compile.
	goroot := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(inv.Tool))))
	cfg := rewrite.Config{
		ImportPath: f.pkg,
		MatchPath:  matchPath,
		Files:      f.goFiles,
		ImportCfg:  f.importCfg,
		GOARCH:     goarch,
		GoVersion:  f.lang,
		Rules:      r,
		OutDir:     objdir,
	}
	if !inlining.Off(args) {
		cfg.Inlined = func(want []inlining.Pos) map[inlining.Pos]inlining.Decision {
			got, err := inlining.Ask(inv.Tool, args, want)
			if err != nil && inv.Verbose {
				// The compile itself will say what is wrong, if anything.
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s: %v\n", matchPath, err)
			}
			return got
		}
	}
	var err error
	if cfg.GoidOffset, err = goidoff.Offset(goroot, goarch); err != nil {
		if !instrument {
			// usdtgen's probes work without the ring, as before it.
			if inv.Verbose {
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s: no in-process ring: %v\n", f.pkg, err)
			}
			return inv.plain(args)
		}
		return fmt.Errorf("%s: finding the goroutine id in this Go runtime: %w", f.pkg, err)
	}
	// Without the P's offsets the probes still work, with no ring.
	if p, err := goidoff.POffsets(goroot, goarch); err == nil {
		cfg.P = &p
	} else if inv.Verbose {
		fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s: no in-process ring: %v\n", f.pkg, err)
	}
	var res *rewrite.Result
	if instrument {
		if res, err = inv.instrument(cfg, matchPath); err != nil {
			return err
		}
	}
	if res == nil {
		res = &rewrite.Result{Files: f.goFiles, Sources: map[string][]byte{}}
	}
	rt := asmgen.Runtime{Goid: cfg.GoidOffset, P: cfg.P}
	if provider && rt.WithRing(asmgen.Arch(goarch)) {
		pr, err := providerring.Package(providerring.Config{
			ImportPath: f.pkg,
			Files:      res.Files,
			Sources:    res.Sources,
			OutDir:     objdir,
			Arch:       asmgen.Arch(goarch),
			Runtime:    rt,
			DefineRing: !res.Ring,
		})
		if err != nil {
			return err
		}
		if inv.Verbose && pr != nil {
			for _, fn := range pr.Probes {
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: writes to the in-process ring too\n", f.pkg, fn)
			}
			for _, why := range pr.Left {
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s; only BPF traces its probe\n", f.pkg, why)
			}
		}
		if pr != nil && len(pr.Probes) > 0 {
			res.Files = pr.Files
			maps.Copy(res.Sources, pr.Sources)
			res.Asm = append(res.Asm, pr.Asm...)
		}
	}
	if res.Asm == nil {
		return inv.plain(args)
	}
	return Step{Runner: inv.Runner, Compile: inv.Tool, Args: args, Files: res.Files, Sources: res.Sources, Asm: res.Asm}.Run()
}

// instrument rewrites the package as the rules say; it returns nil for a
// package to compile as it is.
func (inv Invocation) instrument(cfg rewrite.Config, matchPath string) (*rewrite.Result, error) {
	res, err := rewrite.Package(cfg)
	if err != nil || res == nil {
		return nil, err
	}
	pkg := cfg.ImportPath
	unprobed(inv.Stderr, pkg, res.Funcs, inv.Verbose)
	if res.Skipped != "" {
		// Its functions lose their probes: said without -v too.
		fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s: not instrumented: %s\n", matchPath, res.Skipped)
		return nil, nil
	}
	if inv.Verbose {
		for _, fn := range res.Funcs {
			if fn.Inlined != nil {
				continue
			}
			if fn.Notes {
				notesOnly(inv.Stderr, pkg, fn)
				continue
			}
			fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: %s %s\n", pkg, fn.Name, fn.Entry, fn.Exit)
			if d := fn.Probed; d != nil && fn.Traced != "" && d.Cost+rewrite.ProbedInlineCost <= rewrite.InlineBudget {
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: the compiler inlines it (cost %d of %d), and split it stays inlinable with its probes (about %d more)\n", pkg, fn.Name, d.Cost, rewrite.InlineBudget, rewrite.ProbedInlineCost)
			} else if d != nil {
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: loses its inlining: the compiler inlines it as written (cost %d of %d), and its probes cost more than the rest of the budget; inline: keep in its rule (%s) keeps it as written, unprobed\n", pkg, fn.Name, d.Cost, rewrite.InlineBudget, fn.Rule)
			}
			switch {
			case fn.Switch:
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: as written (sites: switch): the probes are in %s, which nothing calls until a switch at run time\n", pkg, fn.Name, fn.Traced)
			case fn.Traced != "":
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: split: the probes are in %s, which it calls only while traced\n", pkg, fn.Name, fn.Traced)
			}
			if fn.Deferred != "" {
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: unwind: false, but the exit probe is a deferred call: %s\n", pkg, fn.Name, fn.Deferred)
			}
			if fn.Dropped > 0 {
				fmt.Fprintf(inv.Stderr, "usdt-toolexec: %s.%s: %d values not passed: a probe holds 12 (entry: the goroutine id and 11 arguments; exit: the goroutine id, the elapsed time and 10 results)\n", pkg, fn.Name, fn.Dropped)
			}
		}
	}
	return res, nil
}

// unprobed names the functions of pkg that a rule selects and that have
// no probes, with why and the rule's place, -v or not: a rule is the
// user's list of the functions to probe. Those that inline: keep leaves
// as written are the user's choice: without verbose, one line counts
// them, for each rule. So does it name, -v or not, the functions whose
// rule says sites: switch and that are probed as sites: code probes
// them instead: the user asked for them as written.
func unprobed(w io.Writer, pkg string, funcs []rewrite.Func, verbose bool) {
	kept := map[rules.Pos]int{}
	var order []rules.Pos
	for _, fn := range funcs {
		if fn.NoSwitch != "" {
			fmt.Fprintf(w, "usdt-toolexec: %s.%s: no traced copy for sites: switch: %s; it is instrumented as with sites: code (the rule at %s)\n", pkg, fn.Name, fn.NoSwitch, fn.Rule)
		}
		switch {
		case fn.Unprobed != "":
			fmt.Fprintf(w, "usdt-toolexec: %s.%s: not probed: %s (the rule at %s)\n", pkg, fn.Name, fn.Unprobed, fn.Rule)
		case fn.Inlined != nil && verbose:
			fmt.Fprintf(w, "usdt-toolexec: %s.%s: not probed: the compiler inlines it (cost %d of %d), and inline: keep in its rule (%s) keeps it as written\n", pkg, fn.Name, fn.Inlined.Cost, rewrite.InlineBudget, fn.Rule)
		case fn.Inlined != nil:
			if kept[fn.Rule] == 0 {
				order = append(order, fn.Rule)
			}
			kept[fn.Rule]++
		}
	}
	for _, at := range order {
		fmt.Fprintf(w, "usdt-toolexec: %s: %d functions not probed: the compiler inlines them, and inline: keep in the rule at %s keeps them as written (-v names them)\n", pkg, kept[at], at)
	}
}

// notesOnly says, for -v, what a function whose sites are notes got.
func notesOnly(w io.Writer, pkg string, fn rewrite.Func) {
	if fn.Unprobed != "" {
		// unprobed said so.
		return
	}
	fmt.Fprintf(w, "usdt-toolexec: %s.%s: %s %s (notes on its own code)\n", pkg, fn.Name, fn.Entry, fn.Exit)
	if fn.Dropped > 0 {
		fmt.Fprintf(w, "usdt-toolexec: %s.%s: %d values not passed: with sites: notes, only those Go's register ABI keeps in one integer register are\n", pkg, fn.Name, fn.Dropped)
	}
}

// plain runs the compile of args as it is, or reuses the output of the
// same compile in a build under other rules (see package objcache). With
// an -exec wrapper, which may do anything to a compile, it runs it.
func (inv Invocation) plain(args []string) error {
	query := inv
	query.Args = []string{"-V=full"}
	id, err := query.realVersion()
	if err != nil || len(inv.Exec) > 0 {
		return inv.run(inv.Tool, args...)
	}
	return objcache.Run(id, args, inv.Stdout, inv.Stderr, func(stdout, stderr io.Writer) error {
		r := inv.Runner
		r.Stdout, r.Stderr = stdout, stderr
		return r.run(inv.Tool, args...)
	})
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
		if p := gomod.ImportPath(filepath.Dir(src)); p != "" {
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

// Step builds a package from instrumented Go files and the assembly of
// their probe stubs, into the archive the compiler's -o names (-pack): the
// stubs' ABI symbols first (see symABIs), then the Go files, then the
// stubs' object, added to the archive. Adding the object directly is what
// lets a cgo package carry Plan9 stubs: the go command's rule against
// assembly in cgo packages applies to source files only.
type Step struct {
	Runner
	// Compile is the compiler's path; asm is beside it.
	Compile string
	// Args are the compiler's arguments; Files replace their Go files.
	Args  []string
	Files []string
	// Sources holds the contents of the files of Files that are not on
	// disk, by path.
	Sources map[string][]byte
	// Asm is the stubs' Plan9 assembly.
	Asm []byte
}

// Run builds the package.
func (s Step) Run() error {
	f := parseCompileFlags(s.Args)
	objdir := filepath.Dir(f.output)
	asm := filepath.Join(filepath.Dir(s.Compile), "asm")
	asmFile := filepath.Join(objdir, "usdt_auto_probes.s")
	if err := os.WriteFile(asmFile, s.Asm, 0o644); err != nil {
		return err
	}
	asmArgs := []string{"-p", asmPackage}
	if f.trimpath != "" {
		asmArgs = append(asmArgs, "-trimpath", f.trimpath)
	}
	asmArgs = append(asmArgs, f.pic...)
	symabis := symABIs(s.Asm)
	if f.symabis != "" {
		own, err := os.ReadFile(f.symabis)
		if err != nil {
			return err
		}
		if len(own) > 0 && own[len(own)-1] != '\n' {
			own = append(own, '\n')
		}
		symabis = append(own, symabis...)
	}
	sources := maps.Clone(s.Sources)
	symabisPath := filepath.Join(objdir, "usdt_auto_probes.symabis")
	sources[symabisPath] = symabis
	files, release, err := s.inMemory(append([]string{symabisPath}, s.Files...), sources)
	if err != nil {
		return err
	}
	defer release()

	var args []string
	for i := 0; i < len(s.Args); i++ {
		switch a := s.Args[i]; {
		case a == "-complete":
			// The package now has assembly (the stubs).
		case a == "-symabis" && i+1 < len(s.Args):
			i++
		case strings.HasPrefix(a, "-symabis="), strings.HasSuffix(a, ".go"):
		default:
			args = append(args, a)
		}
	}
	args = append(args, "-symabis", files.name(symabisPath))
	for _, path := range s.Files {
		args = append(args, files.name(path))
	}
	// The stubs' object does not depend on the compile: assembling it
	// meanwhile takes the assembler off the build's critical path. Its
	// output waits, so that it never interleaves with the compiler's.
	obj := filepath.Join(objdir, "usdt_auto_probes.o")
	var asmOut bytes.Buffer
	asmRunner := s.Runner
	asmRunner.Stdout, asmRunner.Stderr = &asmOut, &asmOut
	assembled := make(chan error, 1)
	go func() { assembled <- asmRunner.run(asm, append(asmArgs, "-o", obj, asmFile)...) }()
	compiler := s.Runner
	compiler.extraFiles = files.fds
	compileErr := compiler.run(s.Compile, args...)
	asmErr := <-assembled
	s.Stderr.Write(asmOut.Bytes())
	if compileErr != nil {
		return compileErr
	}
	if asmErr != nil {
		return asmErr
	}
	return appendToArchive(f.output, "usdt_probes.o", obj)
}

// passed names the files the compiler reads: those passed through memory
// as the descriptors it inherits, the others by their paths.
type passed struct {
	fds   []*os.File
	names map[string]string
}

func (p passed) name(path string) string {
	if name, ok := p.names[path]; ok {
		return name
	}
	return path
}

// inMemory hands the files of paths that sources holds (contents by path)
// to the compiler as memory files, which it reads as /dev/fd/N. Creating
// a file on disk costs about a millisecond of system time on the machines
// this project is measured on, and a probed build makes one for every Go
// file it instruments; a memory file costs microseconds. What the
// compiler records of a file's name comes from the line directive each of
// these files starts with, not /dev/fd/N; the descriptors are numbered in
// the order of paths all the same, so that the build stays reproducible.
// Through another -exec wrapper, which may not pass descriptors on, or
// where memory files are missing, the sources are written to their paths.
func (s Step) inMemory(paths []string, sources map[string][]byte) (passed, func(), error) {
	p := passed{names: map[string]string{}}
	release := func() {
		for _, f := range p.fds {
			f.Close()
		}
	}
	if len(s.Exec) > 0 {
		return p, release, writeSources(sources)
	}
	for _, path := range paths {
		src, ok := sources[path]
		if !ok {
			continue
		}
		f, err := memoryFile(filepath.Base(path))
		if err != nil {
			release()
			return passed{}, func() {}, writeSources(sources)
		}
		p.fds = append(p.fds, f)
		// The descriptors the child inherits start at 3, in order.
		p.names[path] = fmt.Sprintf("/dev/fd/%d", 2+len(p.fds))
		if _, err := f.Write(src); err != nil {
			release()
			return passed{}, func() {}, err
		}
	}
	return p, release, nil
}

// writeSources writes each of sources (contents by path) to its path.
func writeSources(sources map[string][]byte) error {
	for path, src := range sources {
		if err := os.WriteFile(path, src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// appendToArchive adds a member to the package archive the compiler wrote,
// as `go tool pack r` would (that tool is no longer shipped prebuilt). The
// header fields are fixed so that builds stay reproducible.
func appendToArchive(archive, member, obj string) error {
	data, err := os.ReadFile(obj)
	if err != nil {
		return err
	}
	return appendMember(archive, member, data)
}

// appendMember adds a member holding data to the archive.
func appendMember(archive, member string, data []byte) error {
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

// asmPackage is the package path the stubs are assembled under. Only a
// few packages of the runtime may define register-ABI (ABIInternal)
// assembly, which Go code calls without the stores and restores a call of
// ABI0 assembly costs, and the assembler knows them by that path alone.
// The stubs name every symbol in full, so the path names none of them; the
// linker takes the object as the package's, whose archive holds it.
const asmPackage = "reflect"

// symABIs is what `asm -gensymabis` says of the stubs' assembly, for the
// compiler to call them with the ABI they are written for: a def line per
// function, named in full. The stubs refer to no Go function, so no ref
// line matters. Writing it here saves an assembler run per instrumented
// package: the assembler would parse the whole file, probe table
// included, for these few lines.
func symABIs(asm []byte) []byte {
	var b []byte
	for line := range bytes.Lines(asm) {
		rest, ok := bytes.CutPrefix(line, []byte("TEXT "))
		if !ok {
			continue
		}
		sym, _, ok := bytes.Cut(rest, []byte("(SB)"))
		if !ok {
			continue
		}
		abi := []byte("ABI0")
		if name, sel, ok := bytes.Cut(sym, []byte("<")); ok {
			sym, abi = name, bytes.TrimSuffix(sel, []byte(">"))
		}
		name := strings.NewReplacer("·", ".", "∕", "/").Replace(string(sym))
		b = fmt.Appendf(b, "def %s %s\n", name, abi)
	}
	return b
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
	src := fmt.Sprintf("package %s\n\nconst %s = 0\n", f.Name.Name, probe.Sentinel)
	return path, os.WriteFile(path, []byte(src), 0o644)
}
