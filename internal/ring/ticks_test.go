package ring

import (
	"math/bits"
	"testing"
	"time"
)

// TestCalibrate converts the ticks of a sleep with calibrate's figure, as
// the writers do, and checks them against the monotonic clock.
func TestCalibrate(t *testing.T) {
	if !stableTicks() {
		t.Skip("no time-stamp counter that runs at one rate here (constant_tsc, nonstop_tsc)")
	}
	tickNs := calibrate(10 * time.Millisecond)
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
