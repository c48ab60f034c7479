// Package toolexec is usdt-toolexec's side of the go command's -toolexec
// protocol. The go command starts the wrapper once per tool run; Run parses
// that run into an Invocation (the tool, its arguments, the rules resolved
// once) and runs the tool, changing what it does where probes need it:
//
//   - compile: instrument the functions the rules select (package rewrite),
//     then build the package with its probe stubs (Step);
//   - link: write the ELF notes of every probe table into the executable;
//   - vet: see the same sentinel definition as the compiler;
//   - -V=full: answer with an identity that covers this wrapper and the
//     rules, so that the build cache never mixes builds with and without.
//
// FrontEnd runs the go command itself with -toolexec naming this wrapper,
// for `go tool usdt-toolexec go build`.
package toolexec

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/go-usdt/usdt/rules"
)

// Options are the wrapper's own flags.
type Options struct {
	Verbose bool
	// Rules is the -rules flag: a rules file, relative to the go
	// command's directory.
	Rules string
	// Exec is another toolexec wrapper that runs each tool after this one
	// has changed its arguments.
	Exec []string
}

// Invocation is one run of one tool of the toolchain.
type Invocation struct {
	Runner
	Verbose bool
	Tool    string   // the tool's absolute path
	Name    string   // compile, asm, link, vet, ...
	Args    []string // the tool's arguments, response files expanded
	// Rules are the build's rules, resolved once for this run, for the
	// steps that use them; nil without a rules file.
	Rules *rules.Rules
}

// Run runs one tool of the toolchain for the go command.
func Run(opt Options, tool string, args []string, stdout, stderr io.Writer) error {
	inv := Invocation{
		Runner:  Runner{Exec: opt.Exec, Stdout: stdout, Stderr: stderr},
		Verbose: opt.Verbose,
		Tool:    tool,
		Name:    strings.TrimSuffix(filepath.Base(tool), ".exe"),
		Args:    args,
	}
	query := len(args) > 0 && strings.HasPrefix(args[0], "-V=full")
	var err error
	if !query {
		if inv.Args, err = expandResponseFiles(args); err != nil {
			return err
		}
	}
	// The rules are read only where they matter: finding them walks /proc
	// and the file system, and asm, cgo and the rest run many times a build.
	// The link reads them only to warn about the rules that selected
	// nothing, which must not fail it.
	if query || inv.Name == "compile" || inv.Name == "link" {
		if inv.Rules, err = loadRules(opt); err != nil && inv.Name != "link" {
			return err
		}
	}
	switch {
	case query:
		return inv.version()
	case inv.Name == "compile":
		if err := inv.compile(); err != nil {
			return err
		}
		return inv.recordRuleUse()
	case inv.Name == "link":
		return inv.link()
	case inv.Name == "vet":
		return inv.vet()
	}
	return inv.run(inv.Tool, inv.Args...)
}

// Runner runs tools of the toolchain, through another toolexec wrapper
// when there is one.
type Runner struct {
	Exec           []string
	Stdout, Stderr io.Writer
	// extraFiles are inherited by the tool, as descriptors 3 and on.
	extraFiles []*os.File
}

func (r Runner) run(tool string, args ...string) error {
	if len(r.Exec) > 0 {
		args = append(append(append([]string{}, r.Exec[1:]...), tool), args...)
		tool = r.Exec[0]
	}
	cmd := exec.Command(tool, args...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = r.Stdout
	cmd.Stderr = r.Stderr
	cmd.ExtraFiles = r.extraFiles
	return cmd.Run()
}

// flagValue returns the value of -name in a tool's arguments.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "-"+name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v
		}
	}
	return ""
}
