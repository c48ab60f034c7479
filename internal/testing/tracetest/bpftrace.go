package tracetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Bpftrace is one installation of bpftrace the tests run their scripts
// with: the host's (Debian 12: 0.17 with bcc 0.26 reading the notes), or
// the one in the Debian sid chroot scripts/sid-chroot.sh builds (0.27 with
// libbpf 1.7 reading the notes), so that every check holds for the oldest
// and the newest bpftrace alike.
type Bpftrace struct {
	// Name names the subtests run with it.
	Name string
	// Args is how many arguments of a USDT probe it reads on this
	// machine's architecture: measured, 6 for 0.17 on x86_64 and 8 on
	// aarch64, 12 for 0.27.
	Args int
	// StrLen is how many bytes str() reads by default, NUL included:
	// measured, 64 for 0.17, more than the 256 a probe passes for 0.27.
	StrLen int
	// root is the chroot it runs in, "" for the host.
	root string
}

// Host is the bpftrace on PATH: 0.17 on Debian 12, which CI runs.
var Host = Bpftrace{Name: "host", Args: hostArgs[runtime.GOARCH], StrLen: 64}

// hostArgs is how many arguments of a USDT probe bpftrace 0.17 reads, per
// architecture: measured, arg0-arg5 on x86_64 ("x86_64 doesn't support
// arg6") and arg0-arg7 on aarch64 ("aarch64 doesn't support arg8").
var hostArgs = map[string]int{"amd64": 6, "arm64": 8}

// SidChroot is where scripts/sid-chroot.sh builds the sid chroot:
// $USDT_SID_CHROOT, default /var/cache/go-usdt/sid.
func SidChroot() string {
	if d := os.Getenv("USDT_SID_CHROOT"); d != "" {
		return d
	}
	return "/var/cache/go-usdt/sid"
}

// Bpftraces lists every bpftrace a check must pass with. One that this
// machine lacks is still listed: its Require skips, saying why.
func Bpftraces() []Bpftrace {
	return []Bpftrace{Host, {Name: "sid", Args: 12, StrLen: 1024, root: SidChroot()}}
}

// Command returns the command that runs this bpftrace with args in dir.
// Paths under /tmp, where tests keep their files, mean the same inside the
// chroot; dir "" is the current directory on the host, / in the chroot.
func (b Bpftrace) Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	if b.root == "" {
		cmd := exec.CommandContext(ctx, "bpftrace", args...)
		cmd.Dir = dir
		return cmd
	}
	if dir == "" {
		dir = "/"
	}
	// chroot(8) starts in the new root's /: env -C moves to dir.
	return exec.CommandContext(ctx, "chroot", append([]string{b.root, "env", "-C", dir, "bpftrace"}, args...)...)
}

// Root is the root directory of this bpftrace's system: / for the host.
func (b Bpftrace) Root() string {
	if b.root == "" {
		return "/"
	}
	return b.root
}

// Exec runs a program from /tmp with the libraries of this bpftrace's
// system (the chroot's libbpf 1.7 for sid), like the package-level Output.
func (b Bpftrace) Exec(timeout time.Duration, name string, args ...string) (string, error) {
	if b.root != "" {
		name, args = "chroot", append([]string{b.root, name}, args...)
	}
	return Output(timeout, nil, name, args...)
}

// Output runs this bpftrace like the package-level Output.
func (b Bpftrace) Output(timeout time.Duration, dir string, args ...string) (string, error) {
	return output(timeout, func(ctx context.Context) *exec.Cmd { return b.Command(ctx, dir, args...) })
}

// Require skips the test unless this bpftrace is installed here (in CI
// it fails it: SkipMissing).
func (b Bpftrace) Require(t testing.TB) {
	t.Helper()
	if b.root == "" {
		Require(t, "bpftrace")
		return
	}
	if err := b.usable(); err != nil {
		SkipMissing(t, "tracetest: no bpftrace %s: %v (build it with scripts/sid-chroot.sh, make sid-chroot)", b.Name, err)
	}
}

// usable reports why the chroot cannot run the tests' bpftrace commands.
func (b Bpftrace) usable() error {
	if _, err := os.Stat(filepath.Join(b.root, ".complete")); err != nil {
		return fmt.Errorf("%s is not a complete chroot", b.root)
	}
	tmp := os.TempDir()
	for _, m := range []string{"/proc", "/sys", "/dev", tmp} {
		if mountType(filepath.Join(b.root, m)) == "" {
			return fmt.Errorf("%s is not mounted in %s", m, b.root)
		}
	}
	if tmp != "/tmp" {
		return fmt.Errorf("tests keep their files in %s (TMPDIR), but the chroot only sees /tmp", tmp)
	}
	return nil
}

// attach holds each bpftrace's answer to the attach check, by Name: an
// *attachCheck.
var attach sync.Map

// attachTries is how many times in all a process tries to attach a
// bpftrace that failed: a try can fail for a passing reason (its 60 s
// ran out on a loaded machine), and a failure kept for good would skip,
// or in CI fail, every later test of that bpftrace.
const attachTries = 3

// attachCheck is the attach check of one bpftrace: a success is kept for
// the process, a failure is tried again by the next caller, attachTries
// times in all, then kept.
type attachCheck struct {
	mu    sync.Mutex
	ok    bool
	tries int
	err   error
}

func (c *attachCheck) run(try func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.ok:
		return nil
	case c.tries >= attachTries:
		return fmt.Errorf("%d tries failed, the last: %w", c.tries, c.err)
	}
	c.tries++
	c.err = try()
	c.ok = c.err == nil
	return c.err
}

// RequireAttach skips the test unless this bpftrace can really attach a
// uprobe here: installed, tracefs mounted (mounting it if needed), and the
// kernel and privileges allow BPF uprobes. In CI it fails the test
// instead (SkipMissing). A success is kept for the process; a failure is
// tried again by the next caller, attachTries times in all.
func (b Bpftrace) RequireAttach(t testing.TB) {
	t.Helper()
	b.Require(t)
	check, _ := attach.LoadOrStore(b.Name, new(attachCheck))
	if err := check.(*attachCheck).run(func() error { return tryAttach(b) }); err != nil {
		SkipMissing(t, "tracetest: bpftrace %s cannot attach probes on this machine: %v (scripts/setup.sh installs bpftrace and mounts tracefs; the kernel must let root attach BPF uprobes)", b.Name, err)
	}
}
