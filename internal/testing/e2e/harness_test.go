package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
	"github.com/go-usdt/usdt/internal/testing/wrapperid"
)

var (
	repoRoot string // this module's root
	toolsDir string // usdtgen and usdt-toolexec, built by TestMain
	// wrapperDir holds the usdt-toolexec that builds take as -toolexec:
	// toolsDir's, but for USDT_E2E_RACE=1 (race_test.go).
	wrapperDir string
)

// wrapperBin is the usdt-toolexec that builds run as -toolexec.
func wrapperBin() string { return filepath.Join(wrapperDir, "usdt-toolexec") }

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	repoRoot = filepath.Dir(filepath.Dir(filepath.Dir(wd)))
	dir, err := os.MkdirTemp("", "usdt-e2e-tools-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	toolsDir, wrapperDir = dir, dir
	builtDir = filepath.Join(dir, "built")
	race := guestDir == "" && raceTools()
	if race {
		reports, err := startRaceReports()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(reports)
	}
	if guestDir != "" {
		toolsDir = filepath.Join(guestDir, "tools")
		wrapperDir = toolsDir
	} else if err := buildTools(dir, "", race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := tracetest.MountTracefs(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tracefs:", err)
	}
	code := m.Run()
	if race && raceReported() && code == 0 {
		code = 1
	}
	return code
}

// buildTools builds the commands into dir, for goarch ("" for the host's).
// With race, usdt-toolexec and usdt-export are built with -race, which
// needs cgo, and a plain usdt-toolexec goes into wrapperDir, dir/wrapper,
// for the builds: its identity, part of every cache key of a build it
// wraps, is that of the one make unit built, whose builds are cached,
// where the race detector's would compile the fixtures, the standard
// library included, again on each change of the tracer.
func buildTools(dir, goarch string, race bool) error {
	// The wrapper's identity, in every cache key of the builds it wraps,
	// is that of its instrumenting code: a change to the tracer alone
	// leaves the instrumented builds cached.
	id, err := wrapperid.LDFlag(repoRoot, nil)
	if err != nil {
		return err
	}
	build := func(into string, extraEnv []string, args ...string) error {
		cmd := exec.Command("go", append([]string{"build", id, "-o", into + string(filepath.Separator)}, args...)...)
		cmd.Dir = repoRoot
		if goarch != "" {
			extraEnv = append(extraEnv, "GOARCH="+goarch)
		}
		if extraEnv != nil {
			cmd.Env = append(os.Environ(), extraEnv...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the tools: %v\n%s", err, out)
		}
		return nil
	}
	if !race {
		return build(dir, nil, "./cmd/usdtgen", "./cmd/usdt-toolexec", "./cmd/usdt-export")
	}
	wrapperDir = filepath.Join(dir, "wrapper")
	if err := errors.Join(build(dir, nil, "./cmd/usdtgen"), build(wrapperDir, nil, "./cmd/usdt-toolexec")); err != nil {
		return err
	}
	return build(dir, []string{"CGO_ENABLED=1"}, "-race", "./cmd/usdt-toolexec", "./cmd/usdt-export")
}

// copyTestdata copies testdata/name, subdirectories included, into a new
// directory and returns it.
func copyTestdata(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// userModule copies testdata/name into a new module, modPath, that
// requires this repository through a replace directive.
func userModule(t *testing.T, name, modPath string) string {
	t.Helper()
	if guestDir != "" {
		return filepath.Join(guestDir, name)
	}
	dir := copyTestdata(t, name)
	gomod := fmt.Sprintf("module %s\n\ngo 1.24\n\nrequire github.com/go-usdt/usdt v0.0.0\n\nreplace github.com/go-usdt/usdt => %s\n", modPath, repoRoot)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(repoRoot, "go.sum"), filepath.Join(dir, "go.sum"))
	return dir
}

// fixture makes a user module of testdata/name and runs go generate there,
// which runs usdtgen from PATH as a user's //go:generate line would.
func fixture(t *testing.T, name string) string {
	t.Helper()
	dir := userModule(t, name, "example.com/"+name)
	if guestDir != "" {
		return dir
	}
	goCmd(t, dir, nil, "generate", "./...")
	return dir
}

func env(extra ...string) []string {
	e := append(os.Environ(), "PATH="+toolsDir+string(os.PathListSeparator)+os.Getenv("PATH"), "GOFLAGS=-mod=mod")
	return append(e, extra...)
}

// goCmd runs the go command in dir and fails the test if it fails.
func goCmd(t *testing.T, dir string, extraEnv []string, args ...string) string {
	t.Helper()
	out, err := goRun(dir, extraEnv, args...)
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func goRun(dir string, extraEnv []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env(extraEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// route is one way of building a program with probes.
type route struct {
	name     string
	cgo      bool
	toolexec bool
	flags    []string
	// target is the machine the binary is built for; the zero value is
	// the host.
	target target
}

func (r route) env() []string {
	if r.cgo {
		return append(r.target.env(), "CGO_ENABLED=1")
	}
	return append(r.target.env(), "CGO_ENABLED=0")
}

func (r route) buildArgs(out string) []string {
	args := []string{"build", "-o", out}
	if r.toolexec {
		args = append(args, "-toolexec="+wrapperBin())
	}
	return append(append(args, r.flags...), ".")
}

func build(t *testing.T, dir string, r route) string {
	t.Helper()
	if guestDir != "" {
		return prebuilt(t, filepath.Base(dir), r.name)
	}
	out := filepath.Join(t.TempDir(), "bin")
	goCmd(t, dir, r.env(), r.buildArgs(out)...)
	return out
}

// note is a probe as readelf -n prints it.
type note struct {
	provider, name            string
	pc, base, semaphore, args string
}

var (
	noteProvider = regexp.MustCompile(`^\s*Provider: (\S+)`)
	noteName     = regexp.MustCompile(`^\s*Name: (\S+)`)
	noteLocation = regexp.MustCompile(`^\s*Location: (0x[0-9a-f]+), Base: (0x[0-9a-f]+), Semaphore: (0x[0-9a-f]+)`)
	noteArgs     = regexp.MustCompile(`^\s*Arguments: ?(.*)$`)
)

func readelfNotes(t *testing.T, bin string) []note {
	t.Helper()
	tracetest.Require(t, "readelf")
	out, err := exec.Command("readelf", "-n", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -n %s: %v\n%s", bin, err, out)
	}
	var notes []note
	var cur *note
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := noteProvider.FindStringSubmatch(line); m != nil {
			notes = append(notes, note{provider: m[1]})
			cur = &notes[len(notes)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if m := noteName.FindStringSubmatch(line); m != nil {
			cur.name = m[1]
		} else if m := noteLocation.FindStringSubmatch(line); m != nil {
			cur.pc, cur.base, cur.semaphore = m[1], m[2], m[3]
		} else if m := noteArgs.FindStringSubmatch(line); m != nil {
			cur.args = m[1]
		}
	}
	return notes
}

// bpftrace runs a script with bt against a fresh run of cmd and returns
// its output.
func bpftrace(t *testing.T, bt tracetest.Bpftrace, script string, cmd string) string {
	t.Helper()
	bt.RequireAttach(t)
	out, err := bt.Output(90*time.Second, "", "-e", script, "-c", cmd)
	if err != nil {
		t.Fatalf("bpftrace: %v", err)
	}
	return out
}

// eachBpftrace runs test once with every bpftrace the probes must work
// with, as subtests named after them.
func eachBpftrace(t *testing.T, test func(*testing.T, tracetest.Bpftrace)) {
	t.Helper()
	bts := tracetest.Bpftraces()
	if guestDir != "" {
		// The VM's root is Debian 12's, with its bpftrace only.
		bts = []tracetest.Bpftrace{tracetest.Host}
	}
	for _, bt := range bts {
		t.Run(bt.Name, func(t *testing.T) { test(t, bt) })
	}
}

// process is a fixture program running in the background, its stdout read
// line by line.
type process struct {
	cmd   *exec.Cmd
	lines chan string
}

func start(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return p
}

// startReady starts bin, which prints "ready" and then waits for a line on
// stdin, and returns it once it is ready, with its stdin and the rest of
// its stdout. It is killed, if still running, when the test ends.
func startReady(t *testing.T, bin string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := bufio.NewReader(stdout)
	if line, _ := lines.ReadString('\n'); line != "ready\n" {
		t.Fatalf("%s printed %q, want ready", bin, line)
	}
	return cmd, stdin, lines
}

// expect waits for the process to print want.
func (p *process) expect(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("process exited before printing %q", want)
			}
			if line == want {
				return
			}
		case <-deadline:
			t.Fatalf("process did not print %q within %v", want, timeout)
		}
	}
}

// built holds the binaries this run has built, by what went into them
// (memoBuild), in builtDir.
var (
	built    = map[string]string{}
	builtDir string
)

// memoBuild returns a copy, in a directory of t's, of the binary build
// makes from what key names: the first test to ask builds it, the others
// get a copy of that build, under the same name. A copy, as a test may
// change its binary; the same build, as the go command builds a module
// in another directory anew.
func memoBuild(t *testing.T, key string, build func() string) string {
	t.Helper()
	src, ok := built[key]
	if !ok {
		bin := build()
		dir := filepath.Join(builtDir, strconv.Itoa(len(built)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		src = filepath.Join(dir, filepath.Base(bin))
		copyFile(t, bin, src)
		built[key] = src
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	copyFile(t, src, dst)
	return dst
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// requireAMD64 skips checks written for amd64 on other machines, but for
// the VMs of TestKernels, where they must hold on every architecture.
func requireAMD64(t *testing.T) {
	if runtime.GOARCH != "amd64" && guestDir == "" {
		t.Skipf("argument checks are written for amd64, this is %s", runtime.GOARCH)
	}
}
