package trace

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/ringlayout"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
	"github.com/go-usdt/usdt/rules"
)

// sampleSite is an automatic probe's site of fn (its exit's when exit)
// whose arguments after the goroutine have these names and types, and
// are C strings where strs says.
func sampleSite(fn string, exit bool, args []probe.Arg, strs ...bool) site {
	s := site{fn: fn, exit: exit}
	s.table.Args = append([]probe.Arg{{Name: "goid", Kind: probe.Uint64}}, args...)
	s.args = make([]bpfprog.Arg, len(s.table.Args))
	s.strs = append([]bool{false}, strs...)
	for len(s.strs) < len(s.args) {
		s.strs = append(s.strs, false)
	}
	return s
}

func TestSampleRoles(t *testing.T) {
	elapsed := probe.Arg{Name: "elapsed", Kind: probe.Uint64}
	errArg := probe.Arg{Name: "r2", Type: "error"}
	ctx := probe.Arg{Name: rules.ContextKey, Type: "string"}
	provider := site{Provider: "shop", Name: "order__placed", providerRing: true}
	provider.table.Args = []probe.Arg{{Name: "id"}}
	sites := []site{
		sampleSite("main.serve", false, []probe.Arg{{Name: "r"}, ctx}, false, true),
		sampleSite("main.serve", true, []probe.Arg{elapsed, {Name: "r1"}, errArg}),
		// An entry whose exit is not traced, an exit whose entry is not.
		sampleSite("main.enter", false, nil),
		sampleSite("main.leave", true, []probe.Arg{elapsed, errArg}),
		// The context is no C string here: the program cannot read it.
		sampleSite("main.other", false, []probe.Arg{ctx}),
		sampleSite("main.other", true, []probe.Arg{elapsed, {Name: "r1"}}),
		provider,
	}
	want := []uint16{
		ringlayout.FlagKnown | ringlayout.FlagEntry | 2<<ringlayout.FlagContextShift,
		ringlayout.FlagKnown | ringlayout.FlagExit | 3<<ringlayout.FlagErrorShift,
		ringlayout.FlagKnown,
		ringlayout.FlagKnown | 2<<ringlayout.FlagErrorShift,
		ringlayout.FlagKnown | ringlayout.FlagEntry,
		ringlayout.FlagKnown | ringlayout.FlagExit,
		ringlayout.FlagKnown,
	}
	if got := sampleRoles(sites); !slices.Equal(got, want) {
		t.Errorf("roles %#x, want %#x", got, want)
	}
}

// TestLeftSnapshot: the counters of the calls the program's sampling left
// out come out by function: an exit's from its buckets, with its errors
// where its role counts them; an entry whose exit is not traced, and a
// probe, by their counts; nothing for a function with no call.
func TestLeftSnapshot(t *testing.T) {
	errArg := probe.Arg{Name: "r1", Type: "error"}
	provider := site{Provider: "shop", Name: "order__placed", providerRing: true}
	sites := []site{
		sampleSite("main.serve", false, nil),
		sampleSite("main.serve", true, []probe.Arg{{Name: "elapsed"}, errArg}),
		sampleSite("main.enter", false, nil),
		sampleSite("main.idle", true, []probe.Arg{{Name: "elapsed"}}),
		provider,
	}
	l := newLeftLayout(sites, sampleRoles(sites))
	counters := make([]uint64, l.n)
	serve := l.first[1]
	counters[serve] = 3000                       // the total ns
	counters[serve+1+10] = 2                     // two of [512, 1024) ns
	counters[serve+1+11] = 1                     // one of [1024, 2048)
	counters[serve+1+ringlayout.HistBuckets] = 1 // one error
	counters[l.first[2]] = 4
	counters[l.first[4]] = 5
	snap, calls := l.snapshot(sites, counters)
	if calls != 3+4+5 {
		t.Errorf("%d calls in all, want 12", calls)
	}
	got := map[string]string{}
	for _, f := range snap.Functions {
		got[f.Name] = fmt.Sprintf("calls %d timed %v sum %d errors %v %d", f.Calls, f.Timed, f.SumNs, f.CountsErrors, f.Errors)
	}
	want := map[string]string{
		"main.serve":         "calls 3 timed true sum 3000 errors true 1",
		"main.enter":         "calls 4 timed false sum 0 errors false 0",
		"shop:order__placed": "calls 5 timed false sum 0 errors false 0",
	}
	if !maps.Equal(got, want) {
		t.Errorf("snapshot %v, want %v", got, want)
	}
}
