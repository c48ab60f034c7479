package ring

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// TestInnerPid: the pid a writer's process_vm_readv of itself names is
// the one the process has in its own PID namespace.
func TestInnerPid(t *testing.T) {
	if got := innerPid(os.Getpid()); got != os.Getpid() {
		// This test's process is in a namespace of its own: the outer
		// number is not its own.
		if ns, _ := StatusField("/proc/self/status", "NSpid"); len(strings.Fields(ns)) < 2 {
			t.Errorf("innerPid(self) = %d, want %d", got, os.Getpid())
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("a new PID namespace needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		tracetest.SkipMissing(t, "no unshare(1) (util-linux)")
	}
	cmd := exec.Command("unshare", "--pid", "--fork", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// The sleep is unshare's child, pid 1 of the new namespace.
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
		if f := strings.Fields(string(b)); len(f) > 0 {
			child, _ = strconv.Atoi(f[0])
		}
	}
	if child == 0 {
		t.Fatal("unshare started no child")
	}
	defer exec.Command("kill", strconv.Itoa(child)).Run()
	if got := innerPid(child); got != 1 {
		t.Errorf("innerPid(%d) = %d, want 1, its pid in its namespace", child, got)
	}
	if got := innerPid(1 << 30); got != 1<<30 {
		t.Errorf("innerPid of no process = %d, want the number itself", got)
	}
}
