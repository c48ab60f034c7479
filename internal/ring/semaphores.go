package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/go-usdt/usdt/internal/ringlayout"
	"golang.org/x/sys/unix"
)

// Turning probes on and off. Both the tracer and the program (a writer
// that finds the lease run out, see asmgen's record) take the probes
// down, and either may die or stall at any point, so each change is one
// that both may make, or one that a single side is sure to own:
//
//   - An automatic probe's semaphore is the low half of a 32-bit slot,
//     which the kernel and every USDT consumer count uprobes in; the
//     ring's flag is the high half. Enable stores 1 there and Stop, or
//     the program, 0, with 2-byte stores that never touch the kernel's
//     half: any number of times, in any order, and no update of the
//     kernel's (a read-modify-write of its half while bpftrace attaches)
//     is lost.
//   - A usdtgen probe's semaphore has 16 bits, declared by code usdtgen
//     wrote, so the tracer adds one to it and one side takes it back:
//     the program by a compare-and-swap of its list entry, unless the
//     tracer's Stop has claimed the entry first (see ListNarrow).
//   - The list comes before any flag goes up, so that a lease that lapses
//     at any moment finds every raised flag in it.
//   - Stop marks the on word (Stopping) before it turns the ring off, so
//     that it never turns off a ring that a writer is still taking down.

// Semaphore is a probe's semaphore as Enable turns it on.
type Semaphore struct {
	Addr uint64 // in the process
	// Wide says that Addr is the low half of a 32-bit slot, an automatic
	// probe's (probetable's WideFlag), whose high half the tracer sets;
	// else it is a 16-bit semaphore, a usdtgen probe's, that the tracer
	// adds one to.
	Wide bool
}

// Enable turns the probes of these semaphores on: it lists them first,
// since a program whose tracer's lease lapses takes down what the list
// names, then raises them. It fails when the lease lapsed meanwhile
// (this tracer stopped for longer), having taken down what it raised.
func (s *Session) Enable(sems []Semaphore) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := len(s.list)
	if first+len(sems) > ringlayout.MaxList {
		return fmt.Errorf("%d semaphores to turn on, the ring's list holds %d", first+len(sems), ringlayout.MaxList)
	}
	if first == 0 {
		// The ring records from here on: its mode and clock are set
		// (Preparing), and a probe that fires may now find the lease
		// run out and take down what the list names.
		if err := s.setWord(ringlayout.OnAt, ringlayout.Recording); err != nil {
			return err
		}
	}
	list := make([]byte, 8*len(sems))
	var wide []uint64
	var narrow []int
	for i, sem := range sems {
		e := sem.Addr & ringlayout.ListAddr
		if sem.Wide {
			wide = append(wide, e)
		} else {
			e |= ringlayout.ListNarrow
			narrow = append(narrow, first+i)
		}
		binary.LittleEndian.PutUint64(list[8*i:], e)
		s.list = append(s.list, e)
	}
	if err := errors.Join(s.write(ringlayout.ListAt+uint64(8*first), list), s.setWord(ringlayout.ListLenAt, uint64(len(s.list)))); err != nil {
		s.list = s.list[:first]
		return err
	}
	pause("listed")
	err := errors.Join(s.setFlags(wide, 1), s.raise(narrow))
	pause("raised")
	if err != nil {
		return err
	}
	if on, err := s.word(ringlayout.OnAt); err != nil || on != ringlayout.Recording {
		// The program took down what was up when its lease lapsed;
		// what went up after, this tracer takes down.
		return errors.Join(err, s.undo(), fmt.Errorf("process %d turned its probes off: this tracer did not renew its lease within %v", s.pid, Lease))
	}
	return nil
}

// Stop turns the probes off and the ring with them; Take then takes
// what the buffers still hold. A process that has exited is stopped.
func (s *Session) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.list = nil }()
	if owner, err := s.word(ringlayout.OwnerAt); err != nil || owner != s.token {
		// Gone, or another tracer took the ring over, this one's
		// probes down (takeOver).
		return nil
	}
	return s.stop()
}

// takeOver takes down the probes of a ring that is on while its
// tracer's lease has run out: that tracer was killed, or stopped for
// longer, and the program takes its probes down only when one of them
// fires, which a probe of its list not yet raised never does. It takes
// them down as that tracer's Stop would, with the same guarantee that
// one side alone does, and reports whether the ring is still busy.
func (s *Session) takeOver() (busy bool, err error) {
	on, err := s.word(ringlayout.OnAt)
	if err != nil || on != ringlayout.Recording {
		return true, err
	}
	if stale, err := s.leaseRunOut(); err != nil || !stale {
		return true, err
	}
	n, err := s.word(ringlayout.ListLenAt)
	if err != nil {
		return true, err
	}
	list := make([]byte, 8*min(n, ringlayout.MaxList))
	if err := s.read(s.ctl+ringlayout.ListAt, list); err != nil {
		return true, err
	}
	s.list = make([]uint64, len(list)/8)
	for i := range s.list {
		s.list[i] = binary.LittleEndian.Uint64(list[8*i:])
	}
	err = s.stop()
	s.list = nil
	if err != nil {
		return true, err
	}
	return s.busy()
}

// stop is Stop, for a session whose ring this tracer owns.
func (s *Session) stop() error {
	on, err := s.word(ringlayout.OnAt)
	if err == nil && on == ringlayout.Preparing {
		// Nothing on yet.
		return errors.Join(s.setWord(ringlayout.ListLenAt, 0), s.setWord(ringlayout.OnAt, 0))
	}
	if err != nil || on != ringlayout.Recording {
		// Gone, or the program took its probes down itself.
		return nil
	}
	// A lease renewed now keeps the program from taking them down
	// meanwhile; should it lapse all the same, both sides take them
	// down, which each change allows.
	err = errors.Join(s.until(Lease), s.undo())
	// The ring off, unless a writer is taking the probes down: this
	// tracer's byte in the on word fails every writer's compare-and-swap
	// from here on, and the word read back says whether one won before.
	if werr := s.writeEach([]uint64{s.ctl + ringlayout.StoppingAt}, []byte{1}); werr != nil {
		return errors.Join(err, werr)
	}
	pause("stopping")
	on, rerr := s.word(ringlayout.OnAt)
	switch {
	case rerr != nil:
		return errors.Join(err, rerr)
	case on&0xff == ringlayout.Expiring:
		// The writer ends by turning the ring off, this byte with it.
		for end := time.Now().Add(Lease); on != 0 && time.Now().Before(end); time.Sleep(time.Millisecond) {
			on, rerr = s.word(ringlayout.OnAt)
			if rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	case on == 0:
		return err // a writer finished after this byte
	}
	return errors.Join(err, s.setWord(ringlayout.ListLenAt, 0), s.setWord(ringlayout.OnAt, 0))
}

// undo takes down every probe the session turned on: the flags, and
// the 16-bit semaphores whose entries it claims before the program's
// writer takes them back. A tracer killed between its claim and its
// write leaves a usdtgen probe's semaphore one too high, never one too
// low: the probe calls its fire function, which finds the ring off.
func (s *Session) undo() error {
	var wide []uint64
	var narrow []int
	for i, e := range s.list {
		if e&ringlayout.ListNarrow == 0 {
			wide = append(wide, e)
		} else {
			narrow = append(narrow, i)
		}
	}
	half := len(wide) / 2
	err := s.setFlags(wide[:half], 0)
	pause("undoing")
	err = errors.Join(err, s.setFlags(wide[half:], 0))
	if len(narrow) == 0 {
		return err
	}
	claims := make([]uint64, len(narrow))
	for i, k := range narrow {
		claims[i] = s.ctl + ringlayout.ListAt + uint64(8*k) + 7
	}
	if cerr := s.writeEach(claims, []byte{ringlayout.ListClaimed >> 56}); cerr != nil {
		return errors.Join(err, cerr)
	}
	list := make([]byte, 8*len(s.list))
	if rerr := s.read(s.ctl+ringlayout.ListAt, list); rerr != nil {
		return errors.Join(err, rerr)
	}
	var raised []uint64
	for _, k := range narrow {
		if e := binary.LittleEndian.Uint64(list[8*k:]); e&ringlayout.ListRaised != 0 && e&ringlayout.ListClaimed != 0 {
			raised = append(raised, e&ringlayout.ListAddr)
		}
	}
	return errors.Join(err, s.addSemaphores(raised, 0xffff, nil))
}

// setFlags stores v in the high half of each slot whose low half is at
// addrs.
func (s *Session) setFlags(addrs []uint64, v uint16) error {
	high := make([]uint64, len(addrs))
	for i, a := range addrs {
		high[i] = a + 2
	}
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	return s.writeEach(high, b[:])
}

// raise adds one to the 16-bit semaphores of the list's entries at
// indexes narrow, each marked ListRaised as it goes up.
func (s *Session) raise(narrow []int) error {
	addrs := make([]uint64, len(narrow))
	marks := make([]uint64, len(narrow))
	for i, k := range narrow {
		addrs[i] = s.list[k] & ringlayout.ListAddr
		marks[i] = s.ctl + ringlayout.ListAt + uint64(8*k) + 6
	}
	return s.addSemaphores(addrs, 1, marks)
}

// iovMax is how many pieces one process_vm_readv or process_vm_writev
// takes (the kernel's UIO_MAXIOV).
const iovMax = 1024

// writeEach writes b at each of addrs (in the process), iovMax of them
// a system call; what process_vm_writev did not move goes one by one
// through the process's memory file, which names what fails. A write
// of one byte, or of two aligned ones, is a single store.
func (s *Session) writeEach(addrs []uint64, b []byte) error {
	var errs error
	local := []unix.Iovec{{Base: &b[0], Len: uint64(len(b))}}
	remote := make([]unix.RemoteIovec, iovMax)
	locals := make([]unix.Iovec, iovMax)
	for len(addrs) > 0 {
		chunk := addrs[:min(len(addrs), iovMax)]
		addrs = addrs[len(chunk):]
		for i, a := range chunk {
			remote[i] = unix.RemoteIovec{Base: uintptr(a), Len: len(b)}
			locals[i] = local[0]
		}
		n, _ := unix.ProcessVMWritev(s.pid, locals[:len(chunk)], remote[:len(chunk)], 0)
		for _, a := range chunk[max(n, 0)/len(b):] {
			if _, err := s.mem.WriteAt(b, int64(a)); err != nil {
				errs = errors.Join(errs, s.memError(err))
			}
		}
	}
	return errs
}

// addSemaphores adds d to each 16-bit semaphore of addrs (addresses in
// the process); with marks, it writes ListRaised's byte at marks[i] in
// the same system call as semaphore i, right after it. A read and a
// write of each apiece cost a program of 120,000 probes as many system
// calls; process_vm_readv and process_vm_writev move a chunk of them a
// call. Where one moves fewer, the rest go one by one through the
// process's memory file, which names what fails. It goes on past a
// failure, and returns them all.
func (s *Session) addSemaphores(addrs []uint64, d uint16, marks []uint64) error {
	var errs error
	per := 1
	if marks != nil {
		per = 2
	}
	const chunkMax = iovMax / 2
	buf := make([]byte, 3*chunkMax)
	local := make([]unix.Iovec, 1)
	remote := make([]unix.RemoteIovec, iovMax)
	for at := 0; at < len(addrs); at += chunkMax {
		chunk := addrs[at:min(len(addrs), at+chunkMax)]
		b := buf[:2*len(chunk)]
		local[0].Base, local[0].Len = &b[0], uint64(len(b))
		for i, a := range chunk {
			remote[i] = unix.RemoteIovec{Base: uintptr(a), Len: 2}
		}
		done := 0
		if n, err := unix.ProcessVMReadv(s.pid, local, remote[:len(chunk)], 0); err == nil && n == len(b) {
			// Each value, then its mark, as the remote pieces go.
			w := buf[:(1+per)*len(chunk)]
			if marks == nil {
				w = b
			}
			vals := make([]uint16, len(chunk))
			for i := range chunk {
				vals[i] = binary.LittleEndian.Uint16(b[2*i:]) + d
			}
			for i, a := range chunk {
				if marks == nil {
					binary.LittleEndian.PutUint16(w[2*i:], vals[i])
					continue
				}
				binary.LittleEndian.PutUint16(w[3*i:], vals[i])
				w[3*i+2] = byte((ringlayout.ListNarrow | ringlayout.ListRaised) >> 48)
				remote[2*i] = unix.RemoteIovec{Base: uintptr(a), Len: 2}
				remote[2*i+1] = unix.RemoteIovec{Base: uintptr(marks[at+i]), Len: 1}
			}
			local[0].Base, local[0].Len = &w[0], uint64(len(w))
			n, _ := unix.ProcessVMWritev(s.pid, local, remote[:per*len(chunk)], 0)
			n = max(n, 0)
			if marks == nil {
				done = n / 2
			} else {
				done = n / 3
				if n%3 == 2 {
					// The semaphore went up, not yet its mark.
					if _, err := s.mem.WriteAt(w[3*done+2:3*done+3], int64(marks[at+done])); err != nil {
						errs = errors.Join(errs, s.memError(err))
					}
					done++
				}
			}
		}
		for i := done; i < len(chunk); i++ {
			if err := s.addSemaphore(chunk[i], d); err != nil {
				errs = errors.Join(errs, err)
				continue
			}
			if marks != nil {
				if _, err := s.mem.WriteAt([]byte{byte((ringlayout.ListNarrow | ringlayout.ListRaised) >> 48)}, int64(marks[at+i])); err != nil {
					errs = errors.Join(errs, s.memError(err))
				}
			}
		}
	}
	return errs
}

func (s *Session) addSemaphore(addr uint64, d uint16) error {
	var b [2]byte
	if _, err := s.mem.ReadAt(b[:], int64(addr)); err != nil {
		return s.memError(err)
	}
	binary.LittleEndian.PutUint16(b[:], binary.LittleEndian.Uint16(b[:])+d)
	if _, err := s.mem.WriteAt(b[:], int64(addr)); err != nil {
		return s.memError(err)
	}
	return nil
}

// busy reports whether another tracer records through the ring: it is
// on, unless a tracer left it Stopping or Preparing (it was killed in its
// Stop, its probes already down, or before it turned any on) and its
// lease has run out.
func (s *Session) busy() (bool, error) {
	on, err := s.word(ringlayout.OnAt)
	if err != nil || on != ringlayout.Stopping && on != ringlayout.Preparing {
		return on != 0, err
	}
	stale, err := s.leaseRunOut()
	return !stale, err
}

// leaseRunOut reports whether the ring's lease has run out.
func (s *Session) leaseRunOut() (bool, error) {
	until, err := s.word(ringlayout.UntilAt)
	if err != nil {
		return false, err
	}
	now := uint64(monotonic())
	if until&ringlayout.TicksTag != 0 {
		if readTicks == nil {
			return false, nil
		}
		now = readTicks() | ringlayout.TicksTag
	}
	return now > until, nil
}

// PauseEnv names a step of a session's life at which the tracer stops
// itself (SIGSTOP), for the tests that kill a tracer there: one of
// Steps, a state a Tracee enters or one of these inside it: "listed"
// (Enable has written the list, no probe is on yet), "raised" (the
// probes are on), "undoing" (Stop has begun to turn them off) and
// "stopping" (Stop has turned them off, not yet the ring).
const PauseEnv = "USDT_RING_PAUSE"

var pauseAt = os.Getenv(PauseEnv)

// pause stops the tracer when PauseEnv names step; a test of this
// package may have it do what it likes there. The signal goes to the
// calling thread, which stops before it returns from the call: sent to
// the process, it let the thread go on for a while, through the step.
var pause = func(step string) {
	if pauseAt == step {
		runtime.LockOSThread()
		unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGSTOP)
		runtime.UnlockOSThread()
	}
}
