package ring

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGroupExiting reads this test's own threads: none is dying, so a
// thread's exit here would be its own, not the process's.
func TestGroupExiting(t *testing.T) {
	pid, tid := os.Getpid(), unix.Gettid()
	if got := tgid(tid); got != pid {
		t.Errorf("tgid(%d) = %d, want %d", tid, got, pid)
	}
	if dying(pid, tid) {
		t.Errorf("thread %d, running this test, is dying", tid)
	}
	if groupExiting(pid, tid) {
		t.Errorf("process %d exits, by its threads' state", pid)
	}
	// A thread that is gone is dying: the process's last thread's exit
	// is the process's.
	if !dying(pid, 1<<30) {
		t.Errorf("a thread that does not exist is not dying")
	}
}
