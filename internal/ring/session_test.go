package ring

import (
	"encoding/binary"
	"sync"
	"testing"
	"unsafe"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// TestStopWhileRenewing stops a session while its lease is renewed on
// another goroutine, as trace's renewal goroutine renews a child's while
// the trace ends it. The session is a real one, on this test's own
// process (selfSession), and so are its semaphores. Under go test -race, a Stop and a Renew
// that touch the session's list of semaphores unguarded are a data race.
func TestStopWhileRenewing(t *testing.T) {
	const nSems = 64
	s, ctl := selfSession(t, false)
	sems := make([]uint16, nSems)
	addrs := make([]Semaphore, nSems)
	for i := range sems {
		addrs[i] = Semaphore{Addr: uint64(uintptr(unsafe.Pointer(&sems[i])))}
	}
	if err := s.Enable(addrs); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(ctl[ringlayout.ListLenAt:]); got != nSems {
		t.Fatalf("the ring lists %d semaphores, want %d", got, nSems)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			s.Renew() // an error says the probes are off: Stop's doing
		}
	}()
	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	wg.Wait()
	for i, n := range sems {
		if n != 0 {
			t.Fatalf("semaphore %d is %d after Stop, want 0", i, n)
		}
	}
	if on := binary.LittleEndian.Uint64(ctl[ringlayout.OnAt:]); on != 0 {
		t.Errorf("the ring is on (%d) after Stop", on)
	}
	sink = append(sink, sems)
}

// sink keeps the buffers the session wrote through the process's memory
// file alive until the test has read them.
var sink []any

// TestTakeShares has Take copy at most its limit a call, shared by the
// Ps: records of two Ps whose times alternate, more than a share each,
// come out whole, each once, in the order of their times, over several
// Takes, each saying that the ring is busy until the last.
func TestTakeShares(t *testing.T) {
	const recSize, perP = 32, 20
	takeLimit, minShare = 4*recSize, 2*recSize
	defer func() { takeLimit, minShare = TakeMax, 1<<20 }()
	s, ctl := selfSessionOf(t, 2)
	for p := range 2 {
		buf := ctl[ringlayout.BuffersAt+p*4096:]
		for i := range perP {
			// The site, the goroutine, the time, the thread.
			r := words(0x4a1660, uint64(p+1), uint64(2*i+p+1), 55)
			copy(buf[i*recSize:], r)
		}
		binary.LittleEndian.PutUint64(ctl[ringlayout.HeadersAt+p*ringlayout.HeaderSize+ringlayout.HeadAt:], perP*recSize)
	}
	var times []int64
	for take := 0; ; take++ {
		if take > 2*perP {
			t.Fatalf("Take still busy after %d calls, with %d records taken", take, len(times))
		}
		b, busy, err := s.Take(true)
		if err != nil {
			t.Fatal(err)
		}
		if b != nil && b.Bytes() > takeLimit {
			t.Errorf("Take %d copied %d bytes, more than its limit %d", take, b.Bytes(), takeLimit)
		}
		if b != nil {
			s.Deliver(b, func(r *Record) { times = append(times, r.Time) })
		}
		if !busy {
			break
		}
	}
	if len(times) != 2*perP {
		t.Fatalf("took %d records, want %d: %v", len(times), 2*perP, times)
	}
	for i, tm := range times {
		if tm != int64(i+1) {
			t.Fatalf("records in the order of times %v, want 1 to %d", times, 2*perP)
		}
	}
}
