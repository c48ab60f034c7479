// Command usdt-toolexec is a -toolexec wrapper for the go command that makes
// USDT probes work in binaries linked by Go's own linker:
//
//	go build -toolexec=usdt-toolexec ./...
//
// At link time it finds the probe tables that usdtgen-generated packages
// carry, and writes the ELF sections tracers read (.note.stapsdt, .probes,
// .stapsdt.base) into the executable. It also answers the go command's
// tool-version query with its own identity, so that the build cache never
// serves an executable linked without it.
//
// It also inspects binaries:
//
//	usdt-toolexec list BINARY   # every probe, like tplist
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	verbose bool
}

const usage = `usage:
  go build -toolexec='usdt-toolexec [-v]' ./...
  usdt-toolexec list BINARY
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			if len(args) != 2 {
				fmt.Fprint(stderr, usage)
				return 2
			}
			if err := list(args[1], stdout); err != nil {
				fmt.Fprintln(stderr, "usdt-toolexec:", err)
				return 1
			}
			return 0
		case "-h", "-help", "--help", "help":
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	var opt options
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-v":
			opt.verbose = true
		default:
			fmt.Fprintf(stderr, "usdt-toolexec: unknown flag %s\n%s", args[0], usage)
			return 2
		}
		args = args[1:]
	}
	if len(args) == 0 || !filepath.IsAbs(args[0]) {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err := wrap(opt, args[0], args[1:], stdout, stderr); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(stderr, "usdt-toolexec:", err)
		return 1
	}
	return 0
}

// wrap runs one tool of the Go toolchain, changing what it does where probes
// need it.
func wrap(opt options, tool string, args []string, stdout, stderr io.Writer) error {
	name := strings.TrimSuffix(filepath.Base(tool), ".exe")
	if len(args) > 0 && strings.HasPrefix(args[0], "-V=full") {
		return toolVersion(tool, args, stdout, stderr)
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
	}
	return runTool(tool, args, stdout, stderr)
}

func runTool(tool string, args []string, stdout, stderr io.Writer) error {
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
