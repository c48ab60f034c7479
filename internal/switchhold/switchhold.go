// Package switchhold counts the tracers that want a function of a
// process switched to its traced copy (internal/textpatch), whichever
// process each one is: usdt-toolexec trace, usdt-toolexec switch, their
// keepers (internal/switchkeep). A switch is written once and taken back
// by the last of them to end, not by the first.
//
// Each tracer holds a read lock, an open file description lock
// (F_OFD_SETLK), on one byte of the process's executable for each
// function it switched: the byte at the process id and the function's
// entry (offset pid<<40 | entry, past any real byte of the file, which
// neither lock touches). A lock needs only the file open for reading,
// is the kernel's to count, and goes with the last descriptor of its
// open file, so a tracer that dies holds nothing. Before it writes a
// function back, a tracer asks whether a lock of another open file
// (another tracer's) is on the function's byte (F_OFD_GETLK), and
// leaves the function switched if one is. It asks while every thread
// of the process is stopped for its writes, which one tracer at a time
// can do (ptrace): a tracer that takes its lock after the question
// switches the function again after the writes.
package switchhold

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Holds are one tracer's locks on the functions of one process.
type Holds struct {
	f   *os.File
	pid int
}

// Open opens the executable of process pid, to hold its functions or
// ask who does. It needs what reading /proc/PID/exe needs: what ptrace
// needs.
func Open(pid int) (*Holds, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	return &Holds{f: f, pid: pid}, nil
}

// Close lets every function go; nil holds nothing.
func (h *Holds) Close() error {
	if h == nil {
		return nil
	}
	return h.f.Close()
}

// entryBits are the bits of an entry that its lock's offset keeps:
// one executable's text spans far less than 2^40 bytes.
const entryBits = 40

func (h *Holds) lock(cmd int, typ int16, entry uint64) (unix.Flock_t, error) {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: int64(uint64(h.pid)<<entryBits | entry&(1<<entryBits-1)), Len: 1}
	err := unix.FcntlFlock(h.f.Fd(), cmd, &lk)
	return lk, err
}

// Take holds the functions whose entries (in the process) are entries.
func (h *Holds) Take(entries ...uint64) error {
	for _, e := range entries {
		if _, err := h.lock(unix.F_OFD_SETLK, unix.F_RDLCK, e); err != nil {
			return fmt.Errorf("holding the switch at %#x: %w", e, err)
		}
	}
	return nil
}

// Release lets the functions at entries go; nil holds none.
func (h *Holds) Release(entries ...uint64) error {
	if h == nil {
		return nil
	}
	for _, e := range entries {
		if _, err := h.lock(unix.F_OFD_SETLK, unix.F_UNLCK, e); err != nil {
			return fmt.Errorf("letting the switch at %#x go: %w", e, err)
		}
	}
	return nil
}

// Others reports whether another tracer, whose locks are not h's, holds
// the function at entry.
func (h *Holds) Others(entry uint64) (bool, error) {
	lk, err := h.lock(unix.F_OFD_GETLK, unix.F_WRLCK, entry)
	if err != nil {
		return false, fmt.Errorf("asking who holds the switch at %#x: %w", entry, err)
	}
	return lk.Type != unix.F_UNLCK, nil
}
