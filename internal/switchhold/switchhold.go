// Package switchhold counts the tracers that want a function of a
// process switched to its traced copy (internal/textpatch), whichever
// process each one is: usdt-toolexec trace, usdt-toolexec switch, their
// keepers (internal/switchkeep). A switch is written once and taken back
// by the last of them to end, not by the first.
//
// Each tracer holds a read lock, an open file description lock
// (F_OFD_SETLK), on one byte of the process's executable for each
// function it switched: the byte at the process id and the function's
// index among those of the executable with a traced copy (offset
// pid<<32 | index, past any real byte of the file, which neither lock
// touches; textpatch.Patch's Index, which every tracer of the executable
// gives the function alike). The functions a tracer switches are mostly
// runs of indexes, which it locks a run at a time: the kernel keeps a
// file's locks in a list that each lock walks, and 8,000 locks of a byte
// each took 0.54 s to take. A lock needs only the file open for reading,
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
	"slices"

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

// indexBits are the bits of an index that its lock's offset keeps.
const indexBits = 32

func (h *Holds) lock(cmd int, typ int16, index, n int) (unix.Flock_t, error) {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: int64(uint64(h.pid)<<indexBits | uint64(index)&(1<<indexBits-1)), Len: int64(n)}
	err := unix.FcntlFlock(h.f.Fd(), cmd, &lk)
	return lk, err
}

// Take holds the functions of the indexes, a lock for each run of
// consecutive ones.
func (h *Holds) Take(indexes ...int) error {
	sorted := slices.Clone(indexes)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	for i := 0; i < len(sorted); {
		n := 1
		for i+n < len(sorted) && sorted[i+n] == sorted[i]+n {
			n++
		}
		if _, err := h.lock(unix.F_OFD_SETLK, unix.F_RDLCK, sorted[i], n); err != nil {
			return fmt.Errorf("holding the switches of functions %d to %d: %w", sorted[i], sorted[i]+n-1, err)
		}
		i += n
	}
	return nil
}

// Release lets the functions of the indexes go; nil holds none.
func (h *Holds) Release(indexes ...int) error {
	if h == nil {
		return nil
	}
	for _, i := range indexes {
		if _, err := h.lock(unix.F_OFD_SETLK, unix.F_UNLCK, i, 1); err != nil {
			return fmt.Errorf("letting the switch of function %d go: %w", i, err)
		}
	}
	return nil
}

// OthersIn reports whether another tracer, whose locks are not h's,
// holds any function of the indexes from lo to hi: one question for a
// stop's worth of functions, where most often none is held.
func (h *Holds) OthersIn(lo, hi int) (bool, error) {
	lk, err := h.lock(unix.F_OFD_GETLK, unix.F_WRLCK, lo, hi-lo+1)
	if err != nil {
		return false, fmt.Errorf("asking who holds the switches of functions %d to %d: %w", lo, hi, err)
	}
	return lk.Type != unix.F_UNLCK, nil
}

// Others reports whether another tracer, whose locks are not h's, holds
// the function of index.
func (h *Holds) Others(index int) (bool, error) {
	lk, err := h.lock(unix.F_OFD_GETLK, unix.F_WRLCK, index, 1)
	if err != nil {
		return false, fmt.Errorf("asking who holds the switch of function %d: %w", index, err)
	}
	return lk.Type != unix.F_UNLCK, nil
}
