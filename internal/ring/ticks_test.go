package ring

import (
	"encoding/binary"
	"math"
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
// ns, as Take turns the records' times, while the rate is measured again
// every 20 ms: each within 20 µs of the clock's, the ns never going
// back, and an exit's start (its ns less its elapsed ns as the program
// reckons them, by the rate of the ticks' segment) never before its
// entry's ns. A time that is not in ticks stays as it is.
func TestTickClock(t *testing.T) {
	if !stableTicks() {
		t.Skip("no time-stamp counter that runs at one rate here (constant_tsc, nonstop_tsc)")
	}
	c := tickClock{period: 20 * time.Millisecond}
	k, from, to := calibrate(10 * time.Millisecond)
	c.start(k, from, to)
	if got := c.segments().mono(12345); got != 12345 {
		t.Errorf("a time in ns turned into %d", got)
	}
	var read []anchor
	rerated := 0
	for i := range 40 {
		time.Sleep(time.Duration(i%4) * time.Millisecond * 3)
		read = append(read, readAnchor())
		if _, ok := c.rerate(); ok {
			rerated++
		}
	}
	if rerated < 3 {
		t.Errorf("the rate was measured again %d times in %d readings 20 ms apart or more", rerated, len(read))
	}
	tagged := func(t uint64) int64 { return int64(t | ringlayout.TicksTag) }
	last := int64(0)
	for i, r := range read {
		got := c.segments().mono(tagged(r.ticks))
		if d := got - r.ns; d < -20000 || d > 20000 {
			t.Errorf("reading %d: ticks %d turned into %d ns, %d ns from the clock's %d", i, r.ticks, got, d, r.ns)
		}
		if got < last {
			t.Errorf("reading %d: %d ns, before the reading before it (%d)", i, got, last)
		}
		last = got
	}
	for _, seg := range c.segs {
		for _, d := range []uint64{1, 3, 1000, 123457, 1 << 30} {
			entry, exit := seg.t0+7, seg.t0+7+d
			hi, lo := bits.Mul64(d, seg.k)
			elapsed := int64(hi<<32 | lo>>32)
			if start := c.segments().mono(tagged(exit)) - elapsed; start < c.segments().mono(tagged(entry)) && exit < c.segsEnd(seg) {
				t.Errorf("a call of %d ticks from %d: its start %d ns is before its entry's %d", d, entry, start, c.segments().mono(tagged(entry)))
			}
		}
	}
}

// segsEnd is where the segment after seg begins, or the end of time.
func (c *tickClock) segsEnd(seg segment) uint64 {
	for _, s := range c.segs {
		if s.t0 > seg.t0 {
			return s.t0
		}
	}
	return math.MaxUint64
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
