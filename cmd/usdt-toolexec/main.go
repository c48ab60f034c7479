// Command usdt-toolexec is a -toolexec wrapper for the go command that makes
// USDT probes work in binaries linked by Go's own linker. As a tool of the
// user's module (go get -tool), it runs the go command itself:
//
//	go tool usdt-toolexec [-rules FILE] go build ./...
//
// Installed on PATH, it is named as the wrapper:
//
//	go build -toolexec=usdt-toolexec ./...
//
// At link time it finds the probe tables that usdtgen-generated packages
// carry, and writes the ELF sections tracers read (.note.stapsdt, .probes,
// .stapsdt.base) into the executable. It also answers the go command's
// tool-version query with its own identity, so that the build cache never
// serves an executable linked without it.
//
// With a rules file (-rules FILE, $USDT_RULES, or usdt.yml at the main
// module's root) it also instruments the functions the rules select with
// entry__ and exit__ probes; see docs/rules.md for the rules and the probe
// contract.
//
// It also inspects binaries:
//
//	usdt-toolexec list BINARY   # every probe, like tplist
//	usdt-toolexec bt BINARY [PATTERN...]   # a latency bpftrace script
//	usdt-toolexec trace ...     # a tracer: usdt-toolexec trace -h
//	usdt-toolexec switch ...    # switch functions to their traced copies
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/internal/inspect"
	"github.com/go-usdt/usdt/internal/switchcmd"
	"github.com/go-usdt/usdt/internal/switchplan"
	"github.com/go-usdt/usdt/internal/toolexec"
	"github.com/go-usdt/usdt/internal/trace"
	"github.com/go-usdt/usdt/internal/tracecmd"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  go tool usdt-toolexec [-v] [-rules FILE] [-exec WRAPPER] go build|test|run|install|vet [go flags] [packages]
  go build -toolexec='usdt-toolexec [-v] [-rules FILE] [-exec WRAPPER]' ./...
  usdt-toolexec list BINARY   # every probe, like tplist
  usdt-toolexec list -inlined BINARY
                              # the functions the rules select that stay
                              # unprobed because the compiler inlines them
  usdt-toolexec list -switch BINARY
                              # the functions with traced copies (sites:
                              # switch), and whether each can be switched
  usdt-toolexec bt BINARY [PATTERN...]
                              # a bpftrace script: latency per function, of
                              # the functions (pkg.Func, pkg.Type.Method) or
                              # exit probes the glob patterns match, or all
  usdt-toolexec trace [-json] [-latency | -stats] [-otlp URL] [-pprof FILE] (-p PID | -- CMD ARGS) [PATTERN...]
                              # print probe events with typed arguments, or
                              # count calls in the kernel, or send calls as
                              # OpenTelemetry spans, or write a pprof
                              # profile of them
  usdt-toolexec switch [-v] (-p PID | PATTERN... -- CMD ARGS) [PATTERN...]
                              # switch the functions built with sites:
                              # switch to their traced copies, for
                              # bpftrace, perf and bcc

The first form, for the tool added by go get -tool, runs the go command
with -toolexec set to this wrapper and its flags (-toolexec='go tool
usdt-toolexec' cannot work: the go command runs it in every package's
directory, where go tool does not know the module's tools). The second is
for a wrapper on PATH (go install). Flags before "go" are the wrapper's,
flags after "go build" the go command's.

The rules file selects functions to instrument; without -rules it is
$USDT_RULES, else usdt.yml at the main module's root (or beside go.work),
else there is none. A relative -rules is taken from the current directory.
-exec runs every tool through another toolexec wrapper, after this one.
-v reports what is instrumented and linked.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "list", "bt":
			if args[0] == "list" && len(args) == 3 && args[1] == "-switch" {
				return tracecmd.Status(switchplan.List(args[2], stdout), stderr, "usdt-toolexec:")
			}
			inlined := args[0] == "list" && len(args) > 1 && args[1] == "-inlined"
			if inlined {
				args = append(args[:1:1], args[2:]...)
			}
			if len(args) < 2 || args[0] == "list" && len(args) != 2 {
				fmt.Fprint(stderr, usage)
				return 2
			}
			var err error
			if args[0] == "bt" {
				err = inspect.BT(args[1], args[2:], stdout, stderr)
			} else {
				err = inspect.List(args[1], inlined, stdout, stderr)
			}
			return tracecmd.Status(err, stderr, "usdt-toolexec:")
		case "trace":
			return tracecmd.Run(args[1:], stdout, stderr, func(opt trace.Options, x tracecmd.Exports) error {
				if x.Any() {
					return runExporter(args[1:])
				}
				return trace.Run(opt)
			})
		case "switch":
			return switchcmd.Run(args[1:], stdout, stderr)
		case "-h", "-help", "--help", "help":
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	fs := flag.NewFlagSet("usdt-toolexec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	var opt toolexec.Options
	fs.BoolVar(&opt.Verbose, "v", false, "")
	fs.StringVar(&opt.Rules, "rules", "", "")
	fs.Func("exec", "", func(v string) error { opt.Exec = strings.Fields(v); return nil })
	if err := fs.Parse(args); err != nil {
		return 2
	}
	all, args := args, fs.Args()
	if len(args) > 0 && args[0] == "go" {
		if len(args) < 2 || !slices.Contains(toolexec.GoSubcommands, args[1]) {
			fmt.Fprintf(stderr, "usdt-toolexec: go needs one of %s after it\n%s", strings.Join(toolexec.GoSubcommands, ", "), usage)
			return 2
		}
		return toolexec.FrontEnd(opt, args[1:], stderr)
	}
	if len(args) == 0 || !filepath.IsAbs(args[0]) {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if len(args) > 1 && strings.HasPrefix(args[1], "-V=full") {
		if msg := toolexec.MisusedGoTool(all, len(all)-len(args)); msg != "" {
			fmt.Fprintln(stderr, "usdt-toolexec:", msg)
			return 2
		}
	}
	return tracecmd.Status(toolexec.Run(opt, args[0], args[1:], stdout, stderr), stderr, "usdt-toolexec:")
}
