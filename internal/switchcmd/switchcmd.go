// Package switchcmd is usdt-toolexec switch: it switches the functions
// that a rule built with sites: switch (as the plain build compiles them,
// with a traced copy beside each) to their traced copies in a running
// program, and keeps them switched until it ends or the program does.
// bpftrace, perf and bcc attach by the copies' notes, so they see the
// calls of a switched function, at a NOP's cost.
package switchcmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/switchhold"
	"github.com/go-usdt/usdt/internal/switchkeep"
	"github.com/go-usdt/usdt/internal/switchplan"
	"github.com/go-usdt/usdt/internal/textpatch"
	"github.com/go-usdt/usdt/internal/values"
)

// Usage is switch's usage message.
const Usage = `usage: usdt-toolexec switch [-v] -p PID PATTERN...
       usdt-toolexec switch [-v] PATTERN... -- CMD [ARGS...]

Switches the functions that a glob PATTERN matches (main.*,
'main.Cache.*', as Go names them) and that a rule built with sites:
switch to their traced copies, whose probes bpftrace, perf and bcc attach
to, and keeps them switched until it ends:

  bpftrace -e 'usdt:./app:*' -c "usdt-toolexec switch 'main.*' -- ./app"

With -p it switches process PID's functions, and switches them back on
Ctrl-C, SIGTERM or SIGHUP; it ends when the process does. With -- CMD it
runs CMD in its own place (its process id, input, output, signals and
exit status are CMD's), switched from its first instruction: a helper
process holds the switches, and switches them back if it gets SIGTERM.
A function that cannot be switched is named, with why, and stays as
compiled. -v names each function switched.
`

// Run runs usdt-toolexec switch with args, and returns its exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	var cmd []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, cmd = args[:i], args[i+1:]
	}
	fs := flag.NewFlagSet("usdt-toolexec switch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage) }
	verbose := fs.Bool("v", false, "")
	pid := fs.Int("p", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	patterns := fs.Args()
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			fmt.Fprintf(stderr, "usdt-toolexec switch: bad pattern %q: %v\n", p, err)
			return 2
		}
	}
	switch {
	case len(patterns) == 0:
		fmt.Fprintf(stderr, "usdt-toolexec switch: no PATTERN: name the functions to switch ('main.*' for every function of package main)\n%s", Usage)
		return 2
	case (*pid == 0) == (len(cmd) == 0):
		fmt.Fprintf(stderr, "usdt-toolexec switch: give -p PID or -- CMD, one of them\n%s", Usage)
		return 2
	}
	sw := &switcher{stderr: stderr, verbose: *verbose}
	var err error
	if *pid != 0 {
		err = sw.process(*pid, patterns)
	} else {
		err = sw.exec(cmd, patterns)
	}
	if err != nil {
		fmt.Fprintln(stderr, "usdt-toolexec switch:", values.EscapeLines(err.Error()))
		return 1
	}
	return 0
}

type switcher struct {
	stderr  io.Writer
	verbose bool
}

func (sw *switcher) say(format string, args ...any) {
	sw.line(fmt.Sprintf(format, args...))
}

func (sw *switcher) line(l string) {
	fmt.Fprintln(sw.stderr, "usdt-toolexec switch:", values.EscapeLines(l))
}

// report says what became of each patch, and returns those switched,
// holding them in holds.
func (sw *switcher) report(rep textpatch.Report, patches []textpatch.Patch, holds *switchhold.Holds) []textpatch.Patch {
	done := switchplan.Switched(rep, patches, holds, sw.say)
	if sw.verbose {
		for _, p := range done {
			sw.say("%s switched to %s", p.Func, p.To)
		}
	}
	return done
}

// process switches process pid's functions until a signal or its end.
func (sw *switcher) process(pid int, patterns []string) error {
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	patches, err := switchplan.Plan(exe, patterns, sw.verbose, sw.line)
	if err != nil {
		return err
	}
	bias, err := ring.BiasOf(pid, exe)
	if err != nil {
		return err
	}
	for i := range patches {
		patches[i] = patches[i].Moved(bias)
	}
	gone, err := switchkeep.Exited(pid)
	if err != nil {
		return err
	}
	// Signals first: one that comes during the switch waits for it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	keeper, err := switchkeep.Start("usdt-toolexec switch", pid, patches)
	if err != nil {
		return err
	}
	defer keeper.Done()
	holds, err := switchplan.Hold(pid, patches)
	if err != nil {
		return err
	}
	defer holds.Close()
	start := time.Now()
	rep, err := textpatch.Switch(pid, patches, textpatch.Options{})
	if err != nil {
		return err
	}
	done := sw.report(rep, patches, holds)
	sw.say("%d of %d functions of process %d switched in %v (%s); Ctrl-C switches them back", len(done), len(patches), pid, time.Since(start).Round(time.Microsecond), rep.StopsText())
	select {
	case <-sigs:
	case <-gone:
		return nil
	}
	return sw.restore(pid, done, holds)
}

// restore switches back the functions done, which holds holds, but
// those another tracer holds.
func (sw *switcher) restore(pid int, done []textpatch.Patch, holds *switchhold.Holds) error {
	start := time.Now()
	back, err := switchplan.Restore(pid, done, holds, sw.say)
	if err == nil && sw.verbose {
		sw.say("%d functions of process %d switched back in %v", back, pid, time.Since(start).Round(time.Microsecond))
	}
	return err
}

// guardianEnv, set in its environment, makes this program the helper
// that holds the switches of a command that switch -- CMD runs in its
// own place: its value is the command's process id.
const guardianEnv = "USDT_SWITCH_GUARDIAN"

func init() {
	if v, ok := os.LookupEnv(guardianEnv); ok {
		os.Exit(guard(v))
	}
}

// exec runs cmd in this process's place, switched from its first
// instruction by a guardian.
func (sw *switcher) exec(cmd, patterns []string) error {
	file, err := exec.LookPath(cmd[0])
	if err != nil {
		return err
	}
	if ring.GainsPrivileges(file) {
		return fmt.Errorf("%s gains privileges when it runs (setuid, setgid or file capabilities), which it would not while switch holds it: run it as root, or start it and use -p", file)
	}
	patches, err := switchplan.Plan(file, patterns, sw.verbose, sw.line)
	if err != nil {
		return err
	}
	if len(patches) == 0 {
		return errors.New("no function can be switched")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	mine, its := os.NewFile(uintptr(fds[0]), "guardian"), os.NewFile(uintptr(fds[1]), "switch")
	defer mine.Close()
	g := exec.Command("/proc/self/exe")
	g.Env = append(os.Environ(), guardianEnv+"="+strconv.Itoa(os.Getpid()))
	g.ExtraFiles = []*os.File{its}
	g.Stderr = os.Stderr
	// Its own session: the terminal's Ctrl-C is the command's.
	g.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := g.Start(); err != nil {
		its.Close()
		return fmt.Errorf("starting the process that holds the switches: %w", err)
	}
	its.Close()
	// Without Yama, EINVAL: any process of the user's may.
	unix.Prctl(unix.PR_SET_PTRACER, uintptr(g.Process.Pid), 0, 0, 0)
	fail := func(err error) error {
		g.Process.Kill()
		g.Wait()
		return err
	}
	if err := json.NewEncoder(mine).Encode(guardOrder{Path: file, Patches: patches, Verbose: sw.verbose}); err != nil {
		return fail(err)
	}
	mine.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 1)
	if _, err := io.ReadFull(mine, b); err != nil || b[0] != 1 {
		return fail(fmt.Errorf("the process that holds the switches did not seize this one (%v)", err))
	}
	// The guardian waits for the exec: it is not this process's child
	// to wait for.
	g.Process.Release()
	runtime.LockOSThread()
	err = syscall.Exec(file, cmd, os.Environ())
	return fmt.Errorf("%s: %w", file, err)
}

// A guardOrder is what switch -- CMD sends its guardian.
type guardOrder struct {
	Path    string
	Patches []textpatch.Patch
	Verbose bool
}
