package toolexec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// GoSubcommands are the go commands a front-end run accepts: those that
// compile, and so take -toolexec. FrontEnd must get one of them first.
var GoSubcommands = []string{"build", "install", "run", "test", "vet"}

// FrontEnd runs `go SUB ARGS...` with -toolexec naming this executable and
// its flags. It exists for `go tool usdt-toolexec go build`: the go command
// runs a -toolexec command in each package's directory, where `go tool`
// does not know the user's module (see MisusedGoTool), so the wrapper must
// be named by an absolute path. Under `go tool` that path is the go
// command's copy of the built tool, which stays in place while this
// process runs: `go tool` waits for it and removes a fresh build only
// after, and the build cache trims only entries unused for days.
func FrontEnd(opt Options, args []string, stderr io.Writer) int {
	sub, rest := args[0], args[1:]
	for _, a := range rest {
		if a == "-args" || a == "--" {
			break
		}
		if is, _ := toolexecFlag(a); is {
			fmt.Fprintf(stderr, "usdt-toolexec: go %s: %s: usdt-toolexec sets -toolexec itself\n\thint: run another wrapper after this one with: usdt-toolexec -exec WRAPPER go %s ...\n", sub, a, sub)
			return 2
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "usdt-toolexec:", err)
		return 1
	}
	words := []string{self}
	if opt.Verbose {
		words = append(words, "-v")
	}
	if opt.Rules != "" {
		// The wrapper runs in each package's directory; the user meant
		// the path from here.
		abs, err := filepath.Abs(opt.Rules)
		if err != nil {
			fmt.Fprintln(stderr, "usdt-toolexec:", err)
			return 1
		}
		words = append(words, "-rules="+abs)
	}
	if len(opt.Exec) > 0 {
		words = append(words, "-exec="+strings.Join(opt.Exec, " "))
	}
	toolexec, err := joinToolexec(words)
	if err != nil {
		fmt.Fprintln(stderr, "usdt-toolexec:", err)
		return 1
	}
	// -C must stay the go command's first flag.
	goArgs := []string{sub}
	if len(rest) > 1 && rest[0] == "-C" {
		goArgs, rest = append(goArgs, rest[:2]...), rest[2:]
	} else if len(rest) > 0 && strings.HasPrefix(rest[0], "-C=") {
		goArgs, rest = append(goArgs, rest[0]), rest[1:]
	}
	goArgs = append(append(goArgs, "-toolexec="+toolexec), rest...)
	return runGo(goArgs, stderr)
}

// runGo runs the go command with this process's standard streams and
// returns its exit status, as a shell would report it.
func runGo(args []string, stderr io.Writer) int {
	cmd := exec.Command("go", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "usdt-toolexec:", err)
		return 1
	}
	// A signal sent to this process alone (not to the terminal's whole
	// process group) must still stop the build, which go test and go run
	// pass on to the programs they run.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	signal.Stop(sigs)
	close(sigs)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		if err != nil {
			fmt.Fprintln(stderr, "usdt-toolexec:", err)
			return 1
		}
		return 0
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}

// joinToolexec quotes words so that the go command's -toolexec splitting
// (fields, each optionally in single or double quotes, without escapes)
// reads them back.
func joinToolexec(words []string) (string, error) {
	quoted := make([]string, len(words))
	for i, w := range words {
		switch {
		case w != "" && !strings.ContainsAny(w, " \t\n\r") && w[0] != '\'' && w[0] != '"':
			quoted[i] = w
		case !strings.Contains(w, "'"):
			quoted[i] = "'" + w + "'"
		case !strings.Contains(w, `"`):
			quoted[i] = `"` + w + `"`
		default:
			return "", fmt.Errorf("%q holds a space and both kinds of quotes: the go command's -toolexec cannot carry it", w)
		}
	}
	return strings.Join(quoted, " "), nil
}

// MisusedGoTool returns why the build must stop when this wrapper was
// given as -toolexec='go tool usdt-toolexec', or "". That spelling works
// in the user's module but not in the standard packages' directories,
// where `go tool` fails before this program runs, once per package
// ("no such tool"). The tool identity query comes first and runs in the
// user's directory, so it is where the build can stop at once, with the
// command that works: this message, then the go command's one line.
// args are this program's arguments, the first nflags of them its own flags.
func MisusedGoTool(args []string, nflags int) string {
	ppid := os.Getppid()
	parent := procArgs(ppid)
	n := len(parent) - len(args)
	if n < 3 || filepath.Base(parent[0]) != "go" || parent[1] != "tool" || !slices.Equal(parent[n:], args) {
		return ""
	}
	goTool, flags := parent[:n], args[:nflags]
	suggest := append(append(slices.Clone(goTool), flags...), "go", "build", "[flags]", "[packages]")
	if build := procArgs(parentOf(ppid)); len(build) > 1 && filepath.Base(build[0]) == "go" {
		suggest = append(append(slices.Clone(goTool), flags...), "go")
		for i := 1; i < len(build); i++ {
			switch is, hasValue := toolexecFlag(build[i]); {
			case is && !hasValue:
				i++
			case !is:
				suggest = append(suggest, build[i])
			}
		}
	}
	return fmt.Sprintf("-toolexec='%s' cannot work: the go command runs it in each package's directory, "+
		"and in a standard package's directory go tool does not know this module's tools (\"no such tool\").\n"+
		"\thint: let usdt-toolexec run the go command:\n\t%s", strings.Join(goTool, " "), shellJoin(suggest))
}

// toolexecFlag reports whether a go command argument is the -toolexec
// flag (-toolexec or --toolexec), and whether it holds its value (=...).
func toolexecFlag(arg string) (is, hasValue bool) {
	name, _, hasValue := strings.Cut(arg, "=")
	return name == "-toolexec" || name == "--toolexec", hasValue
}

// procArgs is a process's command line, or nil.
func procArgs(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

// shellJoin quotes words for a POSIX shell, for a command to copy.
func shellJoin(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-[]") == "" {
			quoted[i] = w
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
