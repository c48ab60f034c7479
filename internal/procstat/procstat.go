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
func StartTime(stat []byte) (start string, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}
