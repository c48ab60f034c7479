package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/testing/valuestest"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
	"github.com/go-usdt/usdt/internal/values"
)

// order is what the fuzzed probes pass: a field of every shape the value
// decoder reads.
type order struct {
	ID     int64
	Name   string
	Tags   map[string]int
	Err    error
	Any    any
	Items  []int32
	Data   []byte
	When   time.Time
	Wait   time.Duration
	Ratio  float32
	Next   *order
	Coords [3]int16
	Done   bool
	Ch     chan int
	Fn     func()
	Raw    unsafe.Pointer
}

// layoutArg is a probe table's argument whose layout is that of a value
// of t.
func layoutArg(name string, t reflect.Type) probe.Arg {
	return probe.Arg{Name: name, Type: t.String(), Kind: probe.Pointer, Layout: valuestest.Layout(t).Encode()}
}

// fuzzSites are the sites of FuzzRecord's events, as readSites and
// describe make them of a binary's probes: a usdtgen probe, an automatic
// function's entry and exit, whose arguments and results are read through
// their layouts, and the entry of a function whose argument's layout is
// the fuzzer's.
// describedSites are fuzzSites with their values described by this test
// binary's types, as trace describes a program's, and their type names.
func describedSites(t testing.TB) ([]site, *typeNames) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sites := fuzzSites()
	names, err := describeValues(sites, exe, false)
	if err != nil {
		t.Fatal(err)
	}
	return sites, names
}

func fuzzSites() []site {
	goid := probe.Arg{Name: "goid", Kind: probe.Uint64}
	tables := []struct {
		provider, name, fn string
		exit               bool
		args               []probe.Arg
	}{
		{"shop", "order__placed", "", false, []probe.Arg{
			{Name: "id", Kind: probe.Int64}, {Name: "name", Kind: probe.String}, {Name: "ok", Kind: probe.Bool},
			{Name: "at", Kind: probe.Pointer}, {Name: "small", Kind: probe.Int8}, {Name: "who", Kind: probe.String},
		}},
		{"usdt_main", "entry", "main.(*store).put", false, []probe.Arg{
			goid,
			layoutArg("o", reflect.TypeFor[*order]()),
			layoutArg("byName", reflect.TypeFor[map[string]order]()),
			layoutArg("err", reflect.TypeFor[error]()),
			layoutArg("v", reflect.TypeFor[any]()),
			layoutArg("s", reflect.TypeFor[string]()),
			layoutArg("when", reflect.TypeFor[time.Time]()),
			layoutArg("ids", reflect.TypeFor[map[int64]bool]()),
		}},
		{"usdt_main", "exit", "main.(*store).put", true, []probe.Arg{
			goid, {Name: "elapsed", Kind: probe.Uint64},
			layoutArg("", reflect.TypeFor[order]()),
			layoutArg("err", reflect.TypeFor[error]()),
		}},
		{"usdt_main", "entry", "main.fuzzed", false, []probe.Arg{goid, {Name: "x", Kind: probe.Pointer}}},
	}
	sites := make([]site, len(tables))
	for i, tb := range tables {
		s := &sites[i]
		s.Provider, s.Name, s.fn, s.exit = tb.provider, tb.name, tb.fn, tb.exit
		s.table = probe.Probe{Provider: tb.provider, Name: tb.name, Args: tb.args}
		for _, a := range tb.args {
			s.args = append(s.args, bpfprog.Arg{Size: a.Kind.Size(), Signed: a.Kind.Signed()})
		}
		s.strs = make([]bool, len(s.args))
	}
	describe(sites)
	return sites
}

// bounded reports whether l is within the bounds of every layout a
// tracer decodes: those usdt-toolexec writes into probe tables
// (layout.Of) and those read from a binary's type descriptors
// (values.TypeNames), wherever an interface's type word points.
func bounded(l *layout.Type) bool {
	types := 0
	var walk func(t *layout.Type, depth int) bool
	walk = func(t *layout.Type, depth int) bool {
		if t == nil {
			return true
		}
		if types++; types > layout.MaxTypes || depth > layout.MaxDepth+1 || len(t.Fields) > layout.MaxFields {
			return false
		}
		for _, f := range t.Fields {
			if !walk(f.Type, depth+1) {
				return false
			}
		}
		return walk(t.Elem, depth+1)
	}
	return walk(l, 0)
}

// record is the event the BPF program sends of site i when its arguments
// hold args, their values read from this process's memory.
func record(t testing.TB, sites []site, i int, args []uint64) []byte {
	b := make([]byte, bpfprog.RecEnd)
	le.PutUint64(b[bpfprog.RecTime:], uint64(time.Second))
	le.PutUint64(b[bpfprog.RecPidTgid:], uint64(os.Getpid())<<32|uint64(os.Getpid()))
	le.PutUint32(b[bpfprog.RecCookie:], uint32(i))
	for j, a := range args {
		le.PutUint64(b[bpfprog.RecArgs+8*j:], a)
	}
	if p := sites[i].plan; p != nil {
		area, err := valuestest.Read(p, args)
		if err != nil {
			t.Skipf("cannot read this process's memory: %v", err)
		}
		copy(b[bpfprog.ValsAt(sites[i].strs):], area)
	}
	return b
}

// valsAt is where the value area of record rec is, by its site's strings.
func valsAt(sites []site, rec []byte) int {
	if i := int(le.Uint32(rec[bpfprog.RecCookie:])); i < len(sites) {
		return bpfprog.ValsAt(sites[i].strs)
	}
	return bpfprog.RecVals
}

// sink keeps the values of the seeds' events reachable while they are
// read.
var sink []any

func addr[T any](p *T) uint64 { return uint64(uintptr(unsafe.Pointer(p))) }

// mapWord is the pointer a map is, which the probe passes.
func mapWord(m any) uint64 {
	return uint64(uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&m))[1]))
}

// FuzzRecord feeds the tracer's record decoder events of arbitrary bytes:
// what a probe reads from memory the traced program is changing or has
// freed. Whatever they hold, and whatever a binary's descriptors say of
// the type an interface's type word points at, the events print (as
// text and as JSON objects) and reach Options.Events, their values
// decoded to values, "..." or addresses: never a panic.
//
// The inputs are a record, and the value area of the record of an event
// with values that starts with its bytes (the area is at bpfprog.ValsAt,
// past the argument strings; splitting it off keeps the inputs as short
// as what they hold), and the layout of the last site's argument, as a
// probe table may have it. Each record is decoded as given, as the
// program sends it up to its last byte read, and with the area placed.
func FuzzRecord(f *testing.F) {
	sites, names := describedSites(f)
	groups := values.MapGroupsOf(nil)

	// Seeds: an event of each site, with live values.
	name := "widget"
	next := &order{ID: 2, Name: strings.Repeat("n", 100), Err: &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}}
	o := &order{
		ID: 1, Name: "first", Tags: map[string]int{"a": 1, "b": 2}, Err: errors.New("out of stock"), Any: 42,
		Items: []int32{1, -2, 3}, Data: []byte("bytes"), When: time.Date(2026, 11, 26, 9, 0, 0, 5, time.UTC),
		Wait: time.Second, Ratio: 0.5, Next: next, Coords: [3]int16{1, -1, 7}, Done: true, Ch: make(chan int), Fn: func() {},
	}
	o.Raw = unsafe.Pointer(o)
	byName := map[string]order{"first": *o}
	var errArg error = o.Err
	var anyArg any = order{Name: "in an interface", Any: "nested"}
	when := time.Now()
	ids := map[int64]bool{1: true, 9: false}
	sink = append(sink, name, next, o, byName, errArg, anyArg, when, ids)
	add := func(rec []byte, lay string) {
		at := valsAt(sites, rec)
		f.Add(bytes.TrimRight(rec[:at], "\x00"), bytes.TrimRight(rec[at:], "\x00"), lay)
	}
	// The usdtgen probe's strings are its copies', which the program
	// reads at the addresses the probe passes.
	placed := record(f, sites, 0, []uint64{7, 0xc000123000, 1, addr(o), 0xff, 0})
	copy(placed[bpfprog.RecStrings+bpfprog.StrMax:], "placed\x00")
	add(placed, "")
	add(record(f, sites, 1, []uint64{3, addr(o), mapWord(byName), addr(&errArg), addr(&anyArg), addr(&name), addr(&when), mapWord(ids)}), "")
	add(record(f, sites, 2, []uint64{3, 1500, addr(o), addr(&errArg)}), "")
	// The last site's argument of each shape, with its layout: a pointer
	// or a map is passed as itself, another value by its address.
	for _, a := range []struct {
		t   reflect.Type
		raw uint64
	}{
		{reflect.TypeFor[*order](), addr(o)},
		{reflect.TypeFor[order](), addr(o)},
		{reflect.TypeFor[map[string]order](), mapWord(byName)},
		{reflect.TypeFor[error](), addr(&errArg)},
		{reflect.TypeFor[any](), addr(&anyArg)},
		{reflect.TypeFor[string](), addr(&name)},
		{reflect.TypeFor[time.Time](), addr(&when)},
		{reflect.TypeFor[[]int32](), addr(&o.Items)},
		{reflect.TypeFor[[3]int16](), addr(&o.Coords)},
	} {
		lay := valuestest.Layout(a.t)
		sites[3].layouts = []*layout.Type{nil, lay}
		sites[3].plan = values.NewPlan(sites[3].layouts, groups)
		add(record(f, sites, 3, []uint64{4, a.raw}), lay.Encode())
	}
	f.Add([]byte{}, []byte{}, "")
	f.Add(make([]byte, bpfprog.RecSmall), []byte{}, "")

	var out bytes.Buffer
	d := newDecoder(sites, 0, names)
	text := newPrinter(Options{Stdout: &out, Latency: true})
	var events []*Event
	jsonp := newPrinter(Options{Stdout: &out, JSON: true, Events: func(ev *Event) { events = append(events, ev) }})
	f.Fuzz(func(t *testing.T, rec, area []byte, lay string) {
		s := &sites[3]
		s.layouts, s.plan = nil, nil
		if l, err := layout.Decode(lay); err == nil && bounded(l) {
			s.layouts = []*layout.Type{nil, l}
			s.plan = values.NewPlan(s.layouts, groups)
		}
		full := make([]byte, bpfprog.RecEnd)
		copy(full, rec)
		copy(full[valsAt(sites, full):], area)
		for _, b := range [][]byte{rec, full} {
			ev := d.decode(b)
			if ev == nil {
				continue
			}
			out.Reset()
			text.print(ev)
			text.finish()

			out.Reset()
			events = events[:0]
			jsonp.print(ev)
			jsonp.w.Flush()
			lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
			if len(events) != 1 || len(lines) != 1 || !json.Valid(lines[0]) {
				t.Fatalf("%d events, -json printed\n%s", len(events), out.Bytes())
			}
			for _, v := range events[0].Values() {
				if _, err := json.Marshal(v.Data); err != nil {
					t.Errorf("value %s: %v", v.Name, err)
				}
			}
		}
	})
}
