// Package toolexec is usdt-toolexec's side of the go command's -toolexec
// protocol: it runs one tool of the toolchain (compile, asm, link, vet, or
// a -V=full identity query), changing its arguments where probes need it,
// and it runs the go command itself for `go tool usdt-toolexec go build`.
package toolexec

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Options are the wrapper's own flags.
type Options struct {
	Verbose bool
	Rules   string
	// Exec is another toolexec wrapper that runs each tool after this one
	// has changed its arguments.
	Exec []string
	// Usage is the command's usage text, for the errors that end in it.
	Usage string
}

// wrap runs one tool of the Go toolchain, changing what it does where probes
// need it.
func Wrap(opt Options, tool string, args []string, stdout, stderr io.Writer) error {
	name := strings.TrimSuffix(filepath.Base(tool), ".exe")
	if len(args) > 0 && strings.HasPrefix(args[0], "-V=full") {
		return toolVersion(opt, tool, args, stdout, stderr)
	}
	args, err := expandResponseFiles(args)
	if err != nil {
		return err
	}
	switch name {
	case "compile":
		return compile(opt, tool, args, stdout, stderr)
	case "link":
		return link(opt, tool, args, stdout, stderr)
	case "vet":
		return vet(opt, tool, args, stdout, stderr)
	}
	return opt.runTool(tool, args, stdout, stderr)
}

// runTool runs a tool of the toolchain, through the -exec wrapper if any.
func (opt Options) runTool(tool string, args []string, stdout, stderr io.Writer) error {
	if len(opt.Exec) > 0 {
		args = append(append(append([]string{}, opt.Exec[1:]...), tool), args...)
		tool = opt.Exec[0]
	}
	cmd := exec.Command(tool, args...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
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
