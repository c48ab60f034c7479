package metrics

import (
	"math"
	"slices"
	"testing"
	"time"
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

// TestTally counts calls as their events come: by name in the order first
// seen, timed calls into the bucket of their bit length in ns, errors
// only of functions whose last result is an error, and each snapshot a
// copy that later calls leave as it was.
func TestTally(t *testing.T) {
	var tally Tally
	type call struct {
		name              string
		timed             bool
		ns                uint64
		errResult, failed bool
	}
	for _, c := range []call{
		{"main.get", true, 100, true, false},
		{"main.get", true, 300, true, true},
		{"fire:tick", false, 0, false, false},
		{"main.get", true, 0, true, true},
		{"main.put", true, 1 << 40, false, false},
	} {
		tally.Call(c.name, c.timed, c.ns, c.errResult, c.failed)
	}
	snap := tally.Snapshot()
	tally.Call("main.get", true, 5, true, true)
	if !snap.Events || snap.Lost != 0 || snap.Processes != 0 || snap.SpansDropped != nil {
		t.Errorf("snapshot says Events %v, Lost %d, Processes %d, SpansDropped %v; want a snapshot of events, nothing else known", snap.Events, snap.Lost, snap.Processes, snap.SpansDropped)
	}
	bucketsOf := func(ns ...uint64) []uint64 {
		b := make([]uint64, 64)
		for _, n := range ns {
			b[bitLen(n)]++
		}
		return b
	}
	want := []Function{
		{Name: "main.get", Calls: 3, Timed: true, SumNs: 400, Buckets: bucketsOf(100, 300, 0), CountsErrors: true, Errors: 2},
		{Name: "fire:tick", Calls: 1},
		{Name: "main.put", Calls: 1, Timed: true, SumNs: 1 << 40, Buckets: bucketsOf(1 << 40)},
	}
	if len(snap.Functions) != len(want) {
		t.Fatalf("snapshot has %d functions, want %d: %+v", len(snap.Functions), len(want), snap.Functions)
	}
	for i, w := range want {
		g := snap.Functions[i]
		if g.Name != w.Name || g.Calls != w.Calls || g.Timed != w.Timed || g.SumNs != w.SumNs || g.CountsErrors != w.CountsErrors || g.Errors != w.Errors || !slices.Equal(g.Buckets, w.Buckets) {
			t.Errorf("function %d = %+v, want %+v", i, g, w)
		}
	}
	if got := tally.Snapshot().Functions[0]; got.Calls != 4 || got.Errors != 3 || got.Buckets[3] != 1 {
		t.Errorf("after one more call of main.get (5 ns, failed), it has %d calls, %d errors, bucket 3 %d; want 4, 3, 1", got.Calls, got.Errors, got.Buckets[3])
	}
}

// bitLen is the bit length of n, written out: the bucket a duration of n
// ns falls in.
func bitLen(n uint64) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// TestTallyExemplars keeps the latest exemplar of each exported bucket,
// in the buckets' order, whichever function's first event it was.
func TestTallyExemplars(t *testing.T) {
	var tally Tally
	at := time.Unix(1700000000, 0)
	ex := func(span byte, ns uint64) Exemplar {
		return Exemplar{TraceID: [16]byte{1, span}, SpanID: [8]byte{span}, Ns: ns, Time: at.Add(time.Duration(span))}
	}
	tally.Exemplar("main.get", ex(1, 3000)) // [2048, 4096) ns: bucket le 4096 ns, 4
	tally.Call("main.get", true, 3000, false, false)
	tally.Exemplar("main.get", ex(2, 10)) // below 16 ns: bucket 0
	tally.Exemplar("main.get", ex(3, 2500))
	tally.Exemplar("main.get", ex(4, 1<<40)) // past 2^36 ns: the last, 17
	got := tally.Snapshot().Functions
	want := []Exemplar{ex(2, 10), ex(3, 2500), ex(4, 1<<40)}
	if len(got) != 1 || !slices.Equal(got[0].Exemplars, want) {
		t.Fatalf("exemplars %+v, want %+v", got, want)
	}
	for i, b := range []int{0, 4, 17} {
		if got := want[i].Bucket(); got != b {
			t.Errorf("exemplar of %d ns in bucket %d, want %d", want[i].Ns, got, b)
		}
	}
}
