package trace

import (
	"errors"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/trace/bpfprog"
)

// BenchmarkDecode is the export path's first step: the tracer's decoder
// turning a record, as the ring's reader lays it out (see startEvents),
// into an Event. Each iteration decodes a call of FuzzRecord's
// main.(*store).put: its entry, a pointer to a struct and a string among
// its arguments, whose values the probe read, and its exit, a struct and
// an error. records/s is the rate on the benchmark's cores (-cpu 1 for
// one: scripts/bench-export.sh). In "values" every event's values are
// read, as a span's export reads them; in "errors" only whether the
// exit's last result, an error, is nil (LastError), as -otlp's metrics
// count every call; in "unread" none are, as for a call whose trace
// sampling drops, which decodes no value.
func BenchmarkDecode(b *testing.B) {
	sites, names := describedSites(b)
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
	// values reads every value, errors only the exit's last result, an
	// error (as -otlp's metrics count calls), unread none.
	for _, name := range []string{"values", "errors", "unread"} {
		read := name == "values"
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
				if name == "errors" {
					if isErr, failed := out.LastError(); !isErr || !failed {
						b.Fatalf("the exit's last result: error %v, not nil %v; want both", isErr, failed)
					}
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
