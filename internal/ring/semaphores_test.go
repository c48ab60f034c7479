package ring

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// probes are a program's semaphores for the tests of Enable and Stop:
// automatic probes' 32-bit slots and usdtgen probes' 16-bit semaphores,
// each holding a count of the kernel's (uprobes another tracer attached)
// that the ring must never change.
type probes struct {
	slots  []uint32
	narrow []uint16
	byAddr map[uint64]*uint16 // each 16-bit semaphore, for writerExpires
}

const kernelCount = 3

func newProbes(n int) *probes {
	p := &probes{slots: make([]uint32, n), narrow: make([]uint16, n), byAddr: map[uint64]*uint16{}}
	for i := range n {
		p.slots[i], p.narrow[i] = kernelCount, kernelCount
		p.byAddr[uint64(uintptr(unsafe.Pointer(&p.narrow[i])))] = &p.narrow[i]
	}
	sink = append(sink, p)
	return p
}

func (p *probes) semaphores() []Semaphore {
	var sems []Semaphore
	for i := range p.slots {
		sems = append(sems, Semaphore{Addr: uint64(uintptr(unsafe.Pointer(&p.slots[i]))), Wide: true},
			Semaphore{Addr: uint64(uintptr(unsafe.Pointer(&p.narrow[i])))})
	}
	return sems
}

// check fails unless every slot's high half is flag, and every 16-bit
// semaphore the kernel's count plus narrow.
func (p *probes) check(t *testing.T, when string, flag uint32, narrow uint16) {
	t.Helper()
	for i := range p.slots {
		if p.slots[i] != kernelCount|flag<<16 || p.narrow[i] != kernelCount+narrow {
			t.Fatalf("%s: probe %d's slot is %#x and its 16-bit semaphore %d, want %#x and %d", when, i, p.slots[i], p.narrow[i], kernelCount|flag<<16, kernelCount+narrow)
		}
	}
}

// writerExpires does what asmgen's record does on finding the lease run
// out: the writer that moves the ring from Recording to Expiring clears
// the flag of each wide entry of the list and takes back each 16-bit
// semaphore whose entry it moves from raised to not, unclaimed; then it
// turns the ring off. It reports whether it won the ring.
func writerExpires(ctl []byte, p *probes) bool {
	word := func(off int) *uint64 { return (*uint64)(unsafe.Pointer(&ctl[off])) }
	if !atomic.CompareAndSwapUint64(word(ringlayout.OnAt), ringlayout.Recording, ringlayout.Expiring) {
		return false
	}
	for i := range int(atomic.LoadUint64(word(ringlayout.ListLenAt))) {
		entry := word(ringlayout.ListAt + 8*i)
		e := atomic.LoadUint64(entry)
		if e&ringlayout.ListNarrow == 0 {
			for k := range p.slots {
				if uint64(uintptr(unsafe.Pointer(&p.slots[k]))) == e {
					p.slots[k] &= 0xffff
				}
			}
			continue
		}
		if e>>48 == (ringlayout.ListNarrow|ringlayout.ListRaised)>>48 && atomic.CompareAndSwapUint64(entry, e, e&^ringlayout.ListRaised) {
			*p.byAddr[e&ringlayout.ListAddr]--
		}
	}
	atomic.StoreUint64(word(ringlayout.OnAt), 0)
	return true
}

// TestEnableStop turns probes of both kinds on and off: the tracer sets
// and clears only the slots' high halves and adds one to each 16-bit
// semaphore and takes it back, whatever counts the kernel keeps there.
func TestEnableStop(t *testing.T) {
	s, ctl := selfSession(t, false)
	p := newProbes(3)
	if err := s.Enable(p.semaphores()); err != nil {
		t.Fatal(err)
	}
	p.check(t, "enabled", 1, 1)
	for i, e := range s.list {
		got := binary.LittleEndian.Uint64(ctl[ringlayout.ListAt+8*i:])
		if want := e | ringlayout.ListRaised*(e&ringlayout.ListNarrow>>48); got != want {
			t.Errorf("list entry %d is %#x, want %#x", i, got, want)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	p.check(t, "stopped", 0, 0)
	if on := binary.LittleEndian.Uint64(ctl[ringlayout.OnAt:]); on != 0 {
		t.Errorf("the ring is on (%#x) after Stop", on)
	}
}

// TestLapseAtEachStep has the program's writer find the lease run out
// at each step of Enable and Stop (pause's), as when the tracer stops or
// dies there: whichever side takes the probes down, each is taken down
// once, the kernel's counts stay, and the ring ends off.
func TestLapseAtEachStep(t *testing.T) {
	defer func(p func(string)) { pause = p }(pause)
	for _, step := range []string{"listed", "raised", "undoing", "stopping"} {
		t.Run(step, func(t *testing.T) {
			s, ctl := selfSession(t, false)
			p := newProbes(4)
			won := false
			pause = func(at string) {
				if at == step {
					won = writerExpires(ctl, p)
				}
			}
			err := s.Enable(p.semaphores())
			if enabling := step == "listed" || step == "raised"; enabling != (err != nil) {
				t.Errorf("Enable: %v", err)
			}
			if err == nil {
				s.Stop()
			}
			pause = func(string) {}
			if want := step != "stopping"; won != want {
				t.Errorf("the writer took the ring: %v, want %v", won, want)
			}
			p.check(t, "after the lapse and Stop", 0, 0)
			if on := binary.LittleEndian.Uint64(ctl[ringlayout.OnAt:]); on != 0 {
				t.Errorf("the ring is on (%#x)", on)
			}
		})
	}
}

// TestOpenAfterStopping opens a ring that a tracer killed in Stop left
// Stopping, or killed between Open and Enable left Preparing: refused
// while that tracer's lease runs, taken once it has run out.
func TestOpenAfterStopping(t *testing.T) {
	for _, on := range []uint64{ringlayout.Stopping, ringlayout.Preparing} {
		_, ctl := selfSession(t, false)
		addr := uint64(uintptr(unsafe.Pointer(&ctl[0])))
		binary.LittleEndian.PutUint64(ctl[ringlayout.OnAt:], on)
		binary.LittleEndian.PutUint64(ctl[ringlayout.UntilAt:], uint64(monotonic()+Lease.Nanoseconds()))
		if s, err := Open(os.Getpid(), addr, whereFor(addr), 1, 4096); err == nil {
			s.Close()
			t.Fatalf("on %#x: opened a ring whose tracer's lease runs", on)
		}
		binary.LittleEndian.PutUint64(ctl[ringlayout.UntilAt:], uint64(monotonic()-1))
		s, err := Open(os.Getpid(), addr, whereFor(addr), 1, 4096)
		if err != nil {
			t.Fatalf("a ring left %#x, its lease run out: %v", on, err)
		}
		s.Close()
	}
}

// TestPreparing: the ring a session opens is Preparing, not recording,
// until Enable, so that no writer checks the lease while the tracer
// switches its clock; a session stopped before Enable leaves it off.
func TestPreparing(t *testing.T) {
	s, ctl := selfSession(t, false)
	if on := binary.LittleEndian.Uint64(ctl[ringlayout.OnAt:]); on != ringlayout.Preparing {
		t.Fatalf("after Open the ring is %#x, want Preparing (%#x)", on, ringlayout.Preparing)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if on := binary.LittleEndian.Uint64(ctl[ringlayout.OnAt:]); on != 0 {
		t.Fatalf("stopped before Enable, the ring is %#x, want off", on)
	}
	s, ctl = selfSession(t, false)
	if err := s.Enable(newProbes(1).semaphores()); err != nil {
		t.Fatal(err)
	}
	if on := binary.LittleEndian.Uint64(ctl[ringlayout.OnAt:]); on != ringlayout.Recording {
		t.Fatalf("after Enable the ring is %#x, want Recording", on)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestTakeOver opens a ring whose tracer was killed with its probes on
// and its lease run out before any of them fired: the new tracer takes
// them down, once, and the old one, should it come back, neither renews
// nor stops the new one's session.
func TestTakeOver(t *testing.T) {
	old, ctl := selfSession(t, false)
	p := newProbes(2)
	if err := old.Enable(p.semaphores()); err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&ctl[0])))
	if s, err := Open(os.Getpid(), addr, whereFor(addr), 1, 4096); err == nil {
		s.Close()
		t.Fatal("opened a ring whose tracer's lease runs")
	}
	binary.LittleEndian.PutUint64(ctl[ringlayout.UntilAt:], uint64(monotonic()-1))
	if busy, err := InUse(os.Getpid(), addr); err != nil || busy {
		t.Errorf("a ring on past its lease is in use: %v, %v", busy, err)
	}
	s, err := Open(os.Getpid(), addr, whereFor(addr), 1, 4096)
	if err != nil {
		t.Fatalf("a ring on past its lease: %v", err)
	}
	defer s.Close()
	p.check(t, "taken over", 0, 0)
	if err := s.Enable(p.semaphores()); err != nil {
		t.Fatal(err)
	}
	if err := old.Renew(); err == nil {
		t.Error("the old tracer renewed the new one's lease")
	}
	if err := old.Stop(); err != nil {
		t.Error(err)
	}
	p.check(t, "the old tracer stopped", 1, 1)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	p.check(t, "the new tracer stopped", 0, 0)
}
