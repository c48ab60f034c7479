package ring

import (
	"encoding/binary"
	"math/bits"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// TestCalibrate converts the ticks of a sleep with calibrate's figure, as
// the writers do, and checks them against the monotonic clock.
func TestCalibrate(t *testing.T) {
	if !stableTicks() {
		t.Skip("no time-stamp counter that runs at one rate here (constant_tsc, nonstop_tsc)")
	}
	tickNs, _, _ := calibrate(10 * time.Millisecond)
	for _, d := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond} {
		t0, ns0 := ticksAndNs()
		time.Sleep(d)
		t1, ns1 := ticksAndNs()
		hi, lo := bits.Mul64(t1-t0, tickNs)
		got := int64(hi<<32 | lo>>32)
		want := ns1 - ns0
		if diff := got - want; diff < -want/100 || diff > want/100 {
			t.Errorf("a sleep of %v: %d ns by the ticks, %d ns by the clock", d, got, want)
		}
	}
}

// TestTickClock turns ticks read at moments of the monotonic clock into
// ns, as Take turns the records' times, after sleeps that renew the
// readings and between them: each within 20 µs of the clock's. A time
// that is not in ticks stays as it is.
func TestTickClock(t *testing.T) {
	if !stableTicks() {
		t.Skip("no time-stamp counter that runs at one rate here (constant_tsc, nonstop_tsc)")
	}
	var c tickClock
	_, c.a, c.b = calibrate(anchorGap)
	if got := c.mono(12345); got != 12345 {
		t.Errorf("a time in ns turned into %d", got)
	}
	var read []anchor
	for i := range 6 {
		time.Sleep(time.Duration(i%3) * 7 * time.Millisecond)
		read = append(read, readAnchor())
		if i%2 == 1 {
			c.renew()
		}
	}
	time.Sleep(30 * time.Millisecond)
	c.renew()
	for i, r := range read {
		got := c.mono(int64(r.ticks | ringlayout.TicksTag))
		if d := got - r.ns; d < -20000 || d > 20000 {
			t.Errorf("reading %d: ticks %d turned into %d ns, %d ns from the clock's %d", i, r.ticks, got, d, r.ns)
		}
	}
}

// TestTimeByTicks has a session's writers time calls by the counter: the
// ring then says Ticks with the counter's rate, its wait for room (Block)
// and its lease are in ticks, and records that two Ps timed in ticks come
// out of Take and Deliver in CLOCK_MONOTONIC's ns, in their order, each
// within 20 µs of the clock read beside its ticks.
func TestTimeByTicks(t *testing.T) {
	if !stableTicks() {
		t.Skip("no time-stamp counter that runs at one rate here (constant_tsc, nonstop_tsc)")
	}
	const recSize, perP = 32, 10
	s, ctl := selfSessionOf(t, 2)
	if err := s.Block(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.TimeByTicks(); err != nil {
		t.Fatal(err)
	}
	word := func(at int) uint64 { return binary.LittleEndian.Uint64(ctl[at:]) }
	if c := word(ringlayout.ClockAt); c != ringlayout.Ticks {
		t.Fatalf("the ring's clock is %d, want Ticks (%d)", c, ringlayout.Ticks)
	}
	tickNs := word(ringlayout.TickNsAt)
	hi, lo := bits.Mul64(word(ringlayout.BlockAt), tickNs)
	if block := time.Duration(hi<<32 | lo>>32); block < 1980*time.Millisecond || block > 2020*time.Millisecond {
		t.Errorf("the wait for room is %v by the ring's ticks, want 2s", block)
	}
	if until := word(ringlayout.UntilAt); until&ringlayout.TicksTag == 0 {
		t.Errorf("the lease %#x is not in ticks", until)
	}
	var want []int64
	for i := range 2 * perP {
		if i%5 == 0 {
			time.Sleep(4 * time.Millisecond)
		}
		r := readAnchor()
		want = append(want, r.ns)
		p := i % 2
		rec := words(0x4a1660, uint64(p+1), r.ticks|ringlayout.TicksTag, 55)
		copy(ctl[ringlayout.BuffersAt+p*4096+i/2*recSize:], rec)
	}
	for p := range 2 {
		binary.LittleEndian.PutUint64(ctl[ringlayout.HeadersAt+p*ringlayout.HeaderSize+ringlayout.HeadAt:], perP*recSize)
	}
	time.Sleep(15 * time.Millisecond)
	b, _, err := s.Take(true)
	if err != nil || b == nil {
		t.Fatalf("Take: %v, %v", b, err)
	}
	var got []int64
	s.Deliver(b, func(r *Record) { got = append(got, r.Time) })
	if len(got) != len(want) {
		t.Fatalf("took %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if d := got[i] - want[i]; d < -20000 || d > 20000 {
			t.Errorf("record %d: %d ns, %d from the clock's %d", i, got[i], d, want[i])
		}
	}
}
