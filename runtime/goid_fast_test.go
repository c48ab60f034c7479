//go:build amd64 || arm64

package runtime

import (
	"testing"
	"unsafe"
)

// TestGoidFastPath guards against calibration silently failing on a new Go
// version: Goid would stay correct but become a few hundred times slower.
func TestGoidFastPath(t *testing.T) {
	Goid()
	s := goidState.Load()
	if s <= 0 {
		t.Fatalf("goid offset not found (state %d): Goid falls back to parsing tracebacks", s)
	}
	t.Logf("goid field at offset %d of g", s-1)
}

func TestGoidNoAlloc(t *testing.T) {
	Goid()
	if allocs := testing.AllocsPerRun(1000, func() { sinkInt64 = Goid() }); allocs != 0 {
		t.Errorf("Goid allocates %v times per call, want 0", allocs)
	}
}

func TestCalibrateGoidRepeatable(t *testing.T) {
	Goid()
	before := goidState.Load()
	for range 20 {
		calibrateGoid()
		if after := goidState.Load(); after != before {
			t.Fatalf("calibration found state %d, earlier %d", after, before)
		}
	}
}

func TestGoidFallbackModes(t *testing.T) {
	Goid() // make sure goidOnce has run, so the states set here stick
	saved := goidState.Load()
	defer goidState.Store(saved)

	goidState.Store(goidUseStack)
	if got, want := Goid(), tracebackGoid(t); got != want {
		t.Errorf("traceback fallback: Goid() = %d, want %d", got, want)
	}
	goidState.Store(goidUnknown)
	if got := Goid(); got != 0 {
		t.Errorf("unknown mode: Goid() = %d, want 0", got)
	}
}

func TestFindGoidOffset(t *testing.T) {
	// fakeG stands in for a g struct; it is as large as the scan window
	// so that the scan never leaves it.
	type fakeG [goidScanLimit / 8]int64
	mk := func(ids []int64, set func(g *fakeG, id int64)) []goidSample {
		var s []goidSample
		for _, id := range ids {
			g := new(fakeG)
			set(g, id)
			s = append(s, goidSample{unsafe.Pointer(g), id})
		}
		return s
	}
	ids := []int64{1, 17, 18, 4242}
	tests := []struct {
		name    string
		samples []goidSample
		want    uintptr
		wantOK  bool
	}{
		{"at 152", mk(ids, func(g *fakeG, id int64) { g[19] = id }), 152, true},
		{"at 0", mk(ids, func(g *fakeG, id int64) { g[0] = id }), 0, true},
		{"last word", mk(ids, func(g *fakeG, id int64) { g[len(g)-1] = id }), goidScanLimit - 8, true},
		{"not present", mk(ids, func(g *fakeG, id int64) {}), 0, false},
		{
			// A word that holds one goroutine's id in every g, such as a
			// parent's id, must not be mistaken for the goid.
			"shared value earlier",
			mk(ids, func(g *fakeG, id int64) { g[3] = ids[0]; g[30] = id }),
			240, true,
		},
		{
			"matches only some samples earlier",
			mk(ids, func(g *fakeG, id int64) {
				if id != 4242 {
					g[5] = id
				}
				g[40] = id
			}),
			320, true,
		},
		{"invalid id", mk([]int64{0, 3}, func(g *fakeG, id int64) { g[1] = id }), 0, false},
	}
	for _, tt := range tests {
		got, ok := findGoidOffset(tt.samples)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: findGoidOffset = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}
