// Package procstat reads what /proc/PID/stat says of a process.
package procstat

import (
	"bytes"
	"strings"
)

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
