package pprof

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/go-usdt/usdt/internal/trace"
)

// The traced functions are this test binary's own, so that the Go runtime
// can say where each is and the profile's locations be checked against it.
//
//go:noinline
func outer() {}

//go:noinline
func inner() {}

// The traced copies of split functions, named as the rewriter names them,
// without their functions, which a binary loses where the compiler
// inlined them at every call: split, and counter's Inc method. twice is
// found by neither of its copies: one is another function's.
//
//go:noinline
func split_usdtTraced() {}

type counter struct{ n int }

//go:noinline
func (c *counter) inc_usdtTraced() { c.n++ }

//go:noinline
func twice_usdtTraced() {}

//go:noinline
func twice_usdtTraced1() {}

// The functions' labels, as the tracer gives them, and their symbols.
const (
	thisPkg   = "github.com/go-usdt/usdt/internal/export/pprof"
	outerSym  = thisPkg + ".outer"
	innerSym  = thisPkg + ".inner"
	outerName = "pprof.outer"
	innerName = "pprof.inner"
	splitSym  = thisPkg + ".split"
	incSym    = thisPkg + ".(*counter).Inc"
)

// copies are the symbols of the split functions' traced copies.
var copies = map[string]string{
	splitSym: thisPkg + ".split_usdtTraced",
	incSym:   thisPkg + ".(*counter).inc_usdtTraced",
}

// origin is when the test's events happen, give or take microseconds.
var origin = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func us(n int) time.Time { return origin.Add(time.Duration(n) * time.Microsecond) }

// fn is a traced function of package pkg; its events are on goroutine g
// of process 7.
type fn struct {
	label, pkg string
	g          uint64
}

func (f fn) on(g uint64) fn { f.g = g; return f }

// enter is f's entry event at n µs, its exit traced too.
func (f fn) enter(n int) *trace.Event {
	return &trace.Event{Time: us(n), PID: 7, TID: 70, Provider: "usdt_x", Probe: "entry", Function: f.label, Package: f.pkg, Paired: true, Goroutine: f.g}
}

// leave is f's exit event at n µs, elapsed µs after its entry.
func (f fn) leave(n, elapsed int) *trace.Event {
	return &trace.Event{Time: us(n), PID: 7, TID: 70, Provider: "usdt_x", Probe: "exit", Function: f.label, Package: f.pkg, Exit: true, Goroutine: f.g,
		Elapsed: time.Duration(elapsed) * time.Microsecond}
}

// wantSample is a sample by its stack's function names, leaf first, and
// its calls, own and inclusive wall time in µs.
type wantSample struct {
	stack                  string
	calls, self, inclusive int64
}

func TestProfile(t *testing.T) {
	// Called, so that the linker keeps them.
	outer()
	inner()
	split_usdtTraced()
	new(counter).inc_usdtTraced()
	twice_usdtTraced()
	twice_usdtTraced1()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, out := fn{innerName, thisPkg, 1}, fn{outerName, thisPkg, 1}
	mainFn := fn{"main.main", "main", 2}
	missing := fn{"other.Missing", "example.com/other", 3}
	split, inc, twice := fn{"pprof.split", thisPkg, 4}, fn{"pprof.(*counter).Inc", thisPkg, 4}, fn{"pprof.twice", thisPkg, 4}
	nested := []*trace.Event{
		out.enter(0),
		in.enter(10), in.leave(30, 20),
		in.enter(40),
		// A usdtgen probe is not a call.
		{Time: us(42), PID: 7, TID: 70, Provider: "shop", Probe: "tick"},
		in.leave(45, 5),
		out.leave(100, 100),
		in.on(2).leave(200, 7),
		mainFn.leave(300, 50),
		missing.leave(400, 1),
		split.enter(500), inc.enter(501), inc.leave(502, 1), split.leave(510, 10),
		twice.leave(600, 2),
	}
	tests := []struct {
		name   string
		binary string
		events []*trace.Event
		want   []wantSample
		// start and length are the profile's TimeNanos and
		// DurationNanos, in µs after origin.
		start, length int
		// located are the functions the binary's table has.
		located []string
	}{
		{
			name: "Go binary", binary: self, events: nested,
			want: []wantSample{
				{innerSym + " < " + outerSym, 2, 25, 25},
				{outerSym, 1, 75, 100},
				{innerSym, 1, 7, 7},
				{"main.main", 1, 50, 50},
				{"other.Missing", 1, 1, 1},
				{incSym + " < " + splitSym, 1, 1, 1},
				{splitSym, 1, 9, 10},
				{"pprof.twice", 1, 2, 2},
			},
			start: 0, length: 600,
			located: []string{innerSym, outerSym, "main.main", incSym, splitSym},
		},
		{
			// Without .gopclntab, the functions keep their labels and
			// have no address.
			name: "no Go table", binary: "/bin/true", events: nested[:7],
			want: []wantSample{
				{innerName + " < " + outerName, 2, 25, 25},
				{outerName, 1, 75, 100},
			},
			start: 0, length: 100,
		},
		{name: "no calls", binary: self},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.binary)
			if errors.Is(err, os.ErrNotExist) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range tt.events {
				p.Event(ev)
			}
			var b bytes.Buffer
			if err := p.Write(&b); err != nil {
				t.Fatal("Write:", err)
			}
			got, err := profile.Parse(&b)
			if err != nil {
				t.Fatal("the profile does not parse:", err)
			}
			checkHeader(t, got, tt.binary)
			if len(tt.events) > 0 && (got.TimeNanos != us(tt.start).UnixNano() || got.DurationNanos != int64(tt.length)*1000) {
				t.Errorf("time %d, duration %d ns; want %d, %d", got.TimeNanos, got.DurationNanos, us(tt.start).UnixNano(), tt.length*1000)
			}
			if len(tt.events) == 0 && (got.TimeNanos != 0 || got.DurationNanos != 0) {
				t.Errorf("a profile of no calls has time %d, duration %d ns", got.TimeNanos, got.DurationNanos)
			}
			var samples []wantSample
			for _, s := range got.Sample {
				var names []string
				for _, l := range s.Location {
					names = append(names, l.Line[0].Function.Name)
				}
				samples = append(samples, wantSample{strings.Join(names, " < "), s.Value[0], s.Value[1] / 1000, s.Value[2] / 1000})
			}
			if !slices.Equal(samples, tt.want) {
				t.Errorf("samples\n%v\nwant\n%v", samples, tt.want)
			}
			var located []string
			for _, l := range got.Location {
				if l.Address != 0 {
					located = append(located, l.Line[0].Function.Name)
					checkLocation(t, got, l)
				}
			}
			if !slices.Equal(located, tt.located) {
				t.Errorf("functions with a location: %q, want %q", located, tt.located)
			}
		})
	}
}

// checkHeader checks what every profile of the binary says, whatever
// its calls.
func checkHeader(t *testing.T, p *profile.Profile, binary string) {
	t.Helper()
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if want := []string{"calls/count", "wall/nanoseconds", "inclusive/nanoseconds"}; !slices.Equal(types, want) {
		t.Errorf("sample types %q, want %q", types, want)
	}
	if p.DefaultSampleType != "wall" || p.PeriodType.Type != "wall" || p.Period != 1 {
		t.Errorf("default sample type %q, period %v of %d, want wall, 1 of wall", p.DefaultSampleType, p.PeriodType, p.Period)
	}
	real, _ := filepath.EvalSymlinks(binary)
	if len(p.Mapping) != 1 || p.Mapping[0].File != real {
		t.Fatalf("mappings %v, want one of %s", p.Mapping, real)
	}
	if !slices.Equal(p.Comments, []string{"usdt-toolexec trace -pprof of " + real}) {
		t.Errorf("comments %q", p.Comments)
	}
	f, err := elf.Open(real)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m := p.Mapping[0]; f.Section(".gopclntab") != nil && (m.Start == 0 || m.Limit <= m.Start || !m.HasFunctions || !m.HasFilenames || !m.HasLineNumbers) {
		t.Errorf("mapping %+v of a Go binary", m)
	}
}

// checkLocation checks a location with an address against what the Go
// runtime of this process, the binary profiled, says of that address.
func checkLocation(t *testing.T, p *profile.Profile, l *profile.Location) {
	t.Helper()
	m, f := p.Mapping[0], l.Line[0].Function
	if l.Address < m.Start || l.Address >= m.Limit {
		t.Errorf("%s at %#x, outside its mapping %#x-%#x", f.Name, l.Address, m.Start, m.Limit)
	}
	sym := f.Name
	if c, ok := copies[f.Name]; ok {
		sym = c
	}
	rf := runtime.FuncForPC(uintptr(l.Address))
	if rf == nil || rf.Entry() != uintptr(l.Address) || rf.Name() != sym || f.SystemName != sym {
		t.Errorf("%s at %#x: the runtime has %v there", f.Name, l.Address, rf)
		return
	}
	file, line := rf.FileLine(rf.Entry())
	if f.Filename != file || f.StartLine != int64(line) || l.Line[0].Line != int64(line) {
		t.Errorf("%s at %s:%d (line %d), want %s:%d", f.Name, f.Filename, f.StartLine, l.Line[0].Line, file, line)
	}
}

func TestNewRejects(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notELF, []byte("not an executable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{filepath.Join(t.TempDir(), "gone"), notELF} {
		if p, err := New(bin); err == nil {
			t.Errorf("New(%s) = %v, want an error", bin, p)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// selfProfile is a profile of this test binary's functions.
func selfProfile(t *testing.T) *Profile {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(self)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriteFails(t *testing.T) {
	p := selfProfile(t)
	p.Event(fn{outerName, thisPkg, 1}.leave(10, 10))
	if err := p.Write(failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write to a failing writer: %v, want disk full", err)
	}
}

// TestLossComments checks that the profile says how many calls lost their
// exit event and how many began after a loss, their callers a guess: b
// returned in the loss, and c, a's, is taken for b's.
func TestLossComments(t *testing.T) {
	p := selfProfile(t)
	a, b, c := fn{"main.a", "main", 1}, fn{"main.b", "main", 1}, fn{"main.c", "main", 1}
	after := c.enter(5)
	after.AfterLoss = true
	for _, ev := range []*trace.Event{a.enter(0), b.enter(1), after, c.leave(6, 1), a.leave(9, 9)} {
		p.Event(ev)
	}
	want := []string{
		"1 calls on 1 goroutines lost their exit event: their time is what the calls they made took",
		"1 calls on 1 goroutines began after events of theirs were lost: their callers in the stacks may be calls that had returned",
	}
	if got := comments(t, p); !slices.Equal(got, want) {
		t.Errorf("comments %q, want %q", got, want)
	}
}

// comments writes p and returns its comments after the first, which
// names the binary.
func comments(t *testing.T, p *Profile) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return prof.Comments[1:]
}

// TestUnwoundComment: with no event lost, b, whose exit never came, did
// not return (a panic a recovered): the profile says so, apart from lost
// exits.
func TestUnwoundComment(t *testing.T) {
	p := selfProfile(t)
	a, b := fn{"main.a", "main", 1}, fn{"main.b", "main", 1}
	for _, ev := range []*trace.Event{a.enter(0), b.enter(1), a.leave(9, 9)} {
		p.Event(ev)
	}
	want := []string{"1 calls on 1 goroutines did not return, with none of their events lost: a panic unwound them; their time is what the calls they made took"}
	if got := comments(t, p); !slices.Equal(got, want) {
		t.Errorf("comments %q, want %q", got, want)
	}
}
