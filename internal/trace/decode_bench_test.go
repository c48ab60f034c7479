package trace

import (
	"errors"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
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
// one: scripts/bench-export.sh). In "values" every event's values are
// read, as a span's export reads them; in "unread" none are, as for a
// call whose trace sampling drops, which decodes no value.
func BenchmarkDecode(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	sites := fuzzSites()
	names, err := describeValues(sites, exe, false)
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
	entry := sent(record(b, sites, 1, []uint64{3, addr(o), mapWord(byName), addr(&errArg), addr(&anyArg), addr(&name), addr(&when), mapWord(ids)}))
	exit := sent(record(b, sites, 2, []uint64{3, 1500, addr(o), addr(&errArg)}))
	for _, read := range []bool{true, false} {
		name := map[bool]string{true: "values", false: "unread"}[read]
		b.Run(name, func(b *testing.B) {
			d := newDecoder(sites, 0, names)
			b.ReportAllocs()
			for range b.N {
				in, out := d.decode(entry), d.decode(exit)
				if in == nil || out == nil {
					b.Fatal("a record did not decode")
				}
				if read && (len(in.Values()) != 7 || len(out.Values()) != 2) {
					b.Fatalf("the call decoded to %d and %d values, want 7 and 2", len(in.Values()), len(out.Values()))
				}
			}
			b.ReportMetric(2*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// sent is rec up to its last byte that is not zero, as a transport sends
// a record: up to the farthest byte the program wrote.
func sent(rec []byte) []byte {
	n := len(rec)
	for n > bpfprog.RecSmall && rec[n-1] == 0 {
		n--
	}
	return rec[:n]
}
