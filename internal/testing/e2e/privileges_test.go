package e2e

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// runnerProgram runs the command its arguments name, then calls mark
// three times.
const runnerProgram = `package main

import (
	"fmt"
	"os"
	"os/exec"
)

//go:noinline
func mark(who string) int { return len(who) }

func main() {
	if len(os.Args) > 1 {
		cmd := exec.Command(os.Args[1], os.Args[2:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Println("run:", err)
		}
	}
	for range 3 {
		mark("runner")
	}
	fmt.Println("marked")
}
`

// cappedProgram listens on a port below 1024, which takes
// CAP_NET_BIND_SERVICE, and says whether it could.
const cappedProgram = `package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

func main() {
	for port := 700; port < 800; port++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			l.Close()
			fmt.Println("capped: bound")
			return
		}
		if errors.Is(err, syscall.EACCES) {
			fmt.Println("capped: bind: permission denied")
			os.Exit(1)
		}
	}
	fmt.Println("capped: no free port")
	os.Exit(1)
}
`

// setCapability gives file the capability cap, permitted and effective
// (setcap cap+ep), by its security.capability attribute (struct
// vfs_cap_data, revision 2).
func setCapability(t *testing.T, file string, cap uint) {
	t.Helper()
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b, 0x02000000|1) // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
	binary.LittleEndian.PutUint32(b[4:], 1<<cap)   // permitted, low word
	if err := unix.Setxattr(file, "security.capability", b, 0); err != nil {
		t.Skipf("cannot give %s a file capability here: %v", file, err)
	}
}

// TestRingPrivileges runs, under trace -- CMD, a probed program that runs
// a program with a file capability (cap_net_bind_service+ep), which
// listens on a port below 1024. As nobody, the capability would be lost
// under ptrace: trace lets that process go before its exec, says so, and
// the listen succeeds, while the probed program's calls are still
// counted. As root, nothing is let go.
func TestRingPrivileges(t *testing.T) {
	requireRing(t)
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("every port is unprivileged here: binding one takes no capability")
	}
	runner := buildMain(t, "runner", runnerProgram)
	capped := buildMain(t, "capped", cappedProgram)
	as, dir := asNobodyIn(t, runner)
	cappedCopy := filepath.Join(dir, "capped")
	copyFile(t, capped, cappedCopy)
	setCapability(t, cappedCopy, unix.CAP_NET_BIND_SERVICE)

	t.Run("untraced", func(t *testing.T) {
		// As nobody, without trace: the capability binds.
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", cappedCopy)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "capped: bound") {
			t.Fatalf("the capped program does not bind as nobody, untraced: %v\n%s", err, out)
		}
	})
	for _, tc := range []struct {
		name string
		cmd  []string
		runs int // runs of the capped program
	}{
		{"nobody", []string{"./capped"}, 1},
		// Through a shell the program runs, which forks for each.
		{"shell", []string{"/bin/sh", "-c", "./capped; ./capped"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := as(append([]string{"trace", "-stats", "main.mark", "--", "PROG"}, tc.cmd...)...)
			if err != nil {
				t.Fatalf("trace as nobody: %v\n%s", err, out)
			}
			if n := strings.Count(out, "capped: bound"); n != tc.runs {
				t.Errorf("the capped program bound %d times of %d as nobody under trace:\n%s", n, tc.runs, out)
			}
			if n := strings.Count(out, "runs ./capped, which gains privileges when it runs: trace lets it go"); n != tc.runs {
				t.Errorf("trace said %d times of %d that it let the capped program go:\n%s", n, tc.runs, out)
			}
			if got := statCounts(out)["main.mark"]; got != 3 {
				t.Errorf("trace counted %d calls of main.mark, want 3:\n%s", got, out)
			}
		})
	}
	t.Run("root", func(t *testing.T) {
		out, errOut, err := usdtTrace(t, "-transport", "ring", "-stats", "main.mark", "--", runner, cappedCopy)
		if err != nil {
			t.Fatalf("trace as root: %v\n%s", err, errOut)
		}
		if !strings.Contains(errOut, "capped: bound") || strings.Contains(errOut, "lets it go") {
			t.Errorf("as root, the capped program should bind traced, and trace let nothing go:\n%s", errOut)
		}
		if got := statCounts(out)["main.mark"]; got != 3 {
			t.Errorf("trace counted %d calls of main.mark, want 3:\n%s", got, out)
		}
	})
}
