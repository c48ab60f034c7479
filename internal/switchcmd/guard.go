package switchcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/switchkeep"
	"github.com/go-usdt/usdt/internal/switchplan"
	"github.com/go-usdt/usdt/internal/textpatch"
)

// guard is the guardian of switch -- CMD: it seizes the process pid
// (switch, about to run the command in its place) and, at the exec,
// writes the switches before the command's first instruction, then lets
// it go. It stays until the command ends, and switches back if it gets
// SIGTERM, SIGINT or SIGHUP first. Its messages go to stderr.
func guard(v string) int {
	os.Unsetenv(guardianEnv)
	sw := &switcher{stderr: os.Stderr}
	pid, err := strconv.Atoi(v)
	if err != nil {
		sw.say("guardian: bad %s=%q", guardianEnv, v)
		return 2
	}
	conn := os.NewFile(3, "switch")
	var order guardOrder
	if err := json.NewDecoder(conn).Decode(&order); err != nil {
		sw.say("guardian: reading the switches: %v", err)
		return 2
	}
	sw.verbose = order.Verbose
	gone, err := switchkeep.Exited(pid)
	if err != nil {
		sw.say("guardian: %v", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// ptrace's requests come from the thread that seized.
	runtime.LockOSThread()
	if err := seizeForExec(pid); err != nil {
		sw.say("guardian: %v", err)
		return 1
	}
	conn.Write([]byte{1})
	conn.Close()
	execed, err := awaitExec(pid)
	if err != nil {
		sw.say("guardian: %v", err)
		return 1
	}
	if !execed {
		return 0 // it ended without running the command
	}
	patches := order.Patches
	if bias, err := ring.BiasOf(pid, order.Path); err != nil {
		sw.say("%s: %v: nothing switched", order.Path, err)
		patches = nil
	} else {
		for i := range patches {
			patches[i] = patches[i].Moved(bias)
		}
	}
	holds, err := switchplan.Hold(pid, patches)
	if err != nil {
		unix.PtraceDetach(pid)
		sw.say("%v: nothing switched", err)
		return 1
	}
	defer holds.Close()
	rep, err := textpatch.SwitchHeld(pid, patches)
	unix.PtraceDetach(pid)
	if err != nil {
		sw.say("%v: nothing switched", err)
		return 1
	}
	done := sw.report(rep, patches, holds)
	if sw.verbose {
		sw.say("%d of %d functions of process %d switched at its start", len(done), len(patches), pid)
	}
	runtime.UnlockOSThread()
	select {
	case <-sigs:
		if err := sw.restore(pid, done, holds); err != nil {
			sw.say("%v", err)
			return 1
		}
	case <-gone:
	}
	return 0
}

// seizeForExec seizes every thread of process pid, to be told of its
// exec (PTRACE_O_TRACEEXEC).
func seizeForExec(pid int) error {
	tids, err := textpatch.Threads(pid)
	if err != nil {
		return err
	}
	for _, tid := range tids {
		_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, unix.PTRACE_O_TRACEEXEC, 0, 0)
		if errno != 0 && errno != unix.ESRCH {
			return fmt.Errorf("seize %d: %w", tid, errno)
		}
	}
	return nil
}

// awaitExec lets process pid's threads take their signals and stops
// until it runs an executable, stopped there, or ends (execed false).
func awaitExec(pid int) (execed bool, err error) {
	for {
		var ws unix.WaitStatus
		tid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			return false, nil
		case err != nil:
			return false, err
		}
		switch {
		case ws.Exited() || ws.Signaled():
			if tid == pid {
				return false, nil
			}
		case !ws.Stopped():
		case int(ws)>>16 == unix.PTRACE_EVENT_EXEC:
			return true, nil
		case int(ws)>>16 == unix.PTRACE_EVENT_STOP:
			// A group stop: it stays stopped until SIGCONT.
			unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_LISTEN, uintptr(tid), 0, 0, 0, 0)
		default:
			// A signal on its way: it is the process's.
			unix.PtraceCont(tid, int(ws.StopSignal()))
		}
	}
}
