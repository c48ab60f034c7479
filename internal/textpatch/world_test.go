package textpatch

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUrgency raises the thread that stops a program to SCHED_FIFO for
// a stop, where the process may (root may: CI runs as root), and puts
// back its policy and nice value after; where it may not, or a limit of
// real-time CPU time is set (prlimit --rttime), it leaves the thread as
// it was.
func TestUrgency(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_RTTIME, &lim); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, may bool) {
		var u urgency
		for range 2 {
			u.raise()
			during, err := unix.SchedGetAttr(0, 0)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case may && (during.Policy != unix.SCHED_FIFO || during.Priority != 1):
				t.Errorf("raised as root: policy %d, priority %d, want SCHED_FIFO (%d), 1", during.Policy, during.Priority, unix.SCHED_FIFO)
			case !may && (!u.denied || *during != *before):
				t.Errorf("raised where it may not (denied %v): %+v, was %+v", u.denied, *during, *before)
			}
			u.lower()
			after, err := unix.SchedGetAttr(0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if *after != *before {
				t.Errorf("lowered: %+v, was %+v", *after, *before)
			}
		}
	}
	t.Run("as it runs", func(t *testing.T) {
		check(t, os.Geteuid() == 0 && lim.Cur == unix.RLIM_INFINITY)
	})
	// A soft limit of real-time CPU time, which any process may set
	// itself and take back up to its hard limit.
	t.Run("under RLIMIT_RTTIME", func(t *testing.T) {
		limited := lim
		limited.Cur = 1 << 20
		if lim.Max != unix.RLIM_INFINITY {
			limited.Cur = min(limited.Cur, lim.Max)
		}
		if err := unix.Setrlimit(unix.RLIMIT_RTTIME, &limited); err != nil {
			t.Fatal(err)
		}
		defer unix.Setrlimit(unix.RLIMIT_RTTIME, &lim)
		check(t, false)
	})
}
