package trace

import (
	"errors"
	"os"
	"testing"
	"time"
)

// BenchmarkDecode is the export path's first step: the tracer's decoder
// turning a record, as the ring's reader lays it out (see startEvents),
// into an Event. Each iteration decodes a call of FuzzRecord's
// main.(*store).put: its entry, a pointer to a struct and a string among
// its arguments, whose values the probe read, and its exit, a struct and
// an error. records/s is the rate on the benchmark's cores (-cpu 1 for
// one: scripts/bench-export.sh).
func BenchmarkDecode(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	sites := fuzzSites()
	names, err := describeValues(sites, exe)
	if err != nil {
		b.Fatal(err)
	}
	name := "widget"
	o := &order{ID: 1, Name: "first", Err: errors.New("out of stock"), Items: []int32{1, -2, 3}, When: time.Date(2026, 11, 26, 9, 0, 0, 5, time.UTC)}
	byName := map[string]order{"first": *o}
	var errArg error = o.Err
	var anyArg any = 42
	when := time.Now()
	ids := map[int64]bool{1: true}
	sink = append(sink, name, o, byName, errArg, anyArg, when, ids)
	entry := record(b, sites, 1, []uint64{3, addr(o), mapWord(byName), addr(&errArg), addr(&anyArg), addr(&name), addr(&when), mapWord(ids)})
	exit := record(b, sites, 2, []uint64{3, 1500, addr(o), addr(&errArg)})
	d := newDecoder(sites, 0, names)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if d.decode(entry) == nil || d.decode(exit) == nil {
			b.Fatal("a record did not decode")
		}
	}
	b.ReportMetric(2*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
