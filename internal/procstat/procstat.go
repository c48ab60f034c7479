// Package procstat reads what the kernel says of a process: its
// /proc/PID/stat, and its CPU clock.
package procstat

import (
	"bytes"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CPUTime is the CPU time that every thread of process pid has taken,
// those that exited too, by the process's CPU clock (clock_gettime of
// its CPUCLOCK_SCHED clock), in nanoseconds: one system call, which any
// user may make of any process. It grows while any thread runs, as the
// scheduler accounts that thread's time: when it sleeps or is preempted,
// and at each scheduler tick while it runs on. So a time that did not
// change says that no thread ran before the earlier reading that had not
// yet been accounted then, and none ran since, except for what a thread
// still running since then has not had accounted yet: a later reading
// shows that.
func CPUTime(pid int) (time.Duration, error) {
	var ts unix.Timespec
	// The clock of a whole process: ^pid<<3, its kind (CPUCLOCK_SCHED,
	// 2) in the low bits, without the per-thread bit (4).
	if err := unix.ClockGettime(int32(^pid<<3|2), &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

// StartTime is the start time /proc/PID/stat holds, its 22nd field, in
// clock ticks since boot: with the pid, it names one process, since the
// pid's next process starts later. The command name, the second field,
// is in parentheses and may hold anything, spaces and parentheses too:
// the fields are counted from its last parenthesis. ok is false for
// bytes that hold none.
func StartTime(stat []byte) (start string, ok bool) { return field(stat, 22) }

// State is the state /proc/PID/stat holds, its 3rd field: R, S, D, T
// (stopped by a signal), t (stopped by a tracer), Z, ...
func State(stat []byte) (state string, ok bool) { return field(stat, 3) }

// field is the nth field (from 1) of stat, counted from the command
// name's last parenthesis.
func field(stat []byte, n int) (string, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < n-2 {
		return "", false
	}
	return f[n-3], true
}
