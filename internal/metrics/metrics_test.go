package metrics

import (
	"math"
	"slices"
	"testing"
)

func TestBounds(t *testing.T) {
	b := Bounds()
	if len(b) != 17 || b[0] != 16e-9 || b[1] != 64e-9 || b[16] != math.Ldexp(1, 36)/1e9 {
		t.Errorf("Bounds() = %v, want 16 ns, 64 ns, ... 2^36 ns, 17 bounds", b)
	}
	if !slices.IsSorted(b) {
		t.Errorf("Bounds() %v are not in order", b)
	}
}

// TestBucketCounts merges the counters' 64 buckets into the exported
// ones: each counter bucket, durations below 2^b ns, lands whole in the
// first exported bucket whose bound is 2^b ns or more, and past 2^36 ns
// in the last.
func TestBucketCounts(t *testing.T) {
	at := func(b int, n uint64) []uint64 {
		h := make([]uint64, 64)
		h[b] = n
		return h
	}
	for _, c := range []struct {
		name    string
		buckets []uint64
		want    map[int]uint64 // exported bucket: count; the others 0
	}{
		{"0 ns", at(0, 3), map[int]uint64{0: 3}},
		{"[8, 16) ns under 16 ns", at(4, 2), map[int]uint64{0: 2}},
		{"[16, 32) ns under 64 ns", at(5, 5), map[int]uint64{1: 5}},
		{"[32, 64) ns under 64 ns", at(6, 7), map[int]uint64{1: 7}},
		{"[64, 128) ns under 256 ns", at(7, 1), map[int]uint64{2: 1}},
		{"just under 2^36 ns, in the last bound", at(36, 4), map[int]uint64{16: 4}},
		{"2^36 ns and more, past the bounds", at(37, 6), map[int]uint64{17: 6}},
		{"the last counter bucket", at(63, 1), map[int]uint64{17: 1}},
		{"none", nil, nil},
		{"several", []uint64{1, 1, 1, 1, 1, 1, 1, 1}, map[int]uint64{0: 5, 1: 2, 2: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Function{Buckets: c.buckets}.BucketCounts()
			want := make([]uint64, len(Bounds())+1)
			for i, n := range c.want {
				want[i] = n
			}
			if !slices.Equal(got, want) {
				t.Errorf("BucketCounts() = %v, want %v", got, want)
			}
		})
	}
}

// TestSum adds up the snapshots of processes of one executable: each
// function's calls, durations and buckets by name, whichever process has
// it, and the losses and processes; a nil snapshot adds nothing.
func TestSum(t *testing.T) {
	h := func(pairs ...uint64) []uint64 {
		b := make([]uint64, 64)
		for i := 0; i < len(pairs); i += 2 {
			b[pairs[i]] = pairs[i+1]
		}
		return b
	}
	a := &Snapshot{Lost: 1, Processes: 1, Functions: []Function{
		{Name: "main.work", Calls: 3, Timed: true, SumNs: 300, Buckets: h(7, 3)},
		{Name: "jobs:start", Calls: 2},
	}}
	b := &Snapshot{Lost: 2, Processes: 2, Functions: []Function{
		{Name: "main.idle", Calls: 1, Timed: true, SumNs: 5, Buckets: h(3, 1)},
		{Name: "main.work", Calls: 4, Timed: true, SumNs: 1000, Buckets: h(7, 2, 9, 2)},
	}}
	got := Sum(a, nil, b)
	want := &Snapshot{Lost: 3, Processes: 3, Functions: []Function{
		{Name: "main.work", Calls: 7, Timed: true, SumNs: 1300, Buckets: h(7, 5, 9, 2)},
		{Name: "jobs:start", Calls: 2},
		{Name: "main.idle", Calls: 1, Timed: true, SumNs: 5, Buckets: h(3, 1)},
	}}
	if got.Lost != want.Lost || got.Processes != want.Processes || len(got.Functions) != len(want.Functions) {
		t.Fatalf("Sum = %+v, want %+v", got, want)
	}
	for i, w := range want.Functions {
		g := got.Functions[i]
		if g.Name != w.Name || g.Calls != w.Calls || g.Timed != w.Timed || g.SumNs != w.SumNs || !slices.Equal(g.Buckets, w.Buckets) {
			t.Errorf("function %d: %+v, want %+v", i, g, w)
		}
	}
	if a.Functions[0].Calls != 3 || a.Functions[0].Buckets[7] != 3 {
		t.Errorf("Sum changed its first snapshot: %+v", a.Functions[0])
	}
	if s := Sum(); s == nil || len(s.Functions) != 0 {
		t.Errorf("Sum() = %+v, want an empty snapshot", s)
	}
}
