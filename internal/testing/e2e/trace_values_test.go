package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// traceLine is one event of usdt-toolexec trace's text output.
type traceLine struct {
	g     string // goroutine id of an automatic probe, "" for usdtgen's
	label string // provider:name, or the Go function
	exit  bool
	// vals are the arguments or results as printed, names dropped:
	// strings quoted, bools as true or false, pointers in hex.
	vals    []string
	elapsed string // an exit's, as printed
}

// parseTrace parses the event lines of trace's text output; it is the one
// place that knows their layout.
func parseTrace(t *testing.T, out string) []traceLine {
	t.Helper()
	var lines []traceLine
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			break // the -latency histograms follow
		}
		l, ok := parseTraceLine(line)
		if !ok {
			t.Fatalf("trace printed a line that is no event: %q\n%s", line, out)
		}
		lines = append(lines, l)
	}
	return lines
}

var traceHead = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{6} (?:g=(\d+)|pid=\d+ tid=\d+) `)

func parseTraceLine(line string) (traceLine, bool) {
	var l traceLine
	m := traceHead.FindStringSubmatch(line)
	if m == nil {
		return l, false
	}
	l.g, line = m[1], line[len(m[0]):]
	// The value list is the last parenthesized group outside quotes: a Go
	// label may hold parentheses too, as in main.(*Cache).Get.
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return l, false
	}
	l.elapsed = strings.TrimSpace(line[end+1:])
	open := -1
	for i, depth, quoted := end, 0, false; i >= 0; i-- {
		switch c := line[i]; {
		case c == '"' && !escaped(line, i):
			quoted = !quoted
		case quoted:
		case c == ')':
			depth++
		case c == '(':
			depth--
			if depth == 0 {
				open = i
			}
		}
		if open >= 0 {
			break
		}
	}
	if open < 0 {
		return l, false
	}
	l.label, l.exit = strings.CutSuffix(line[:open], " = ")
	l.vals = splitValues(line[open+1 : end])
	return l, true
}

// escaped reports whether the byte at i follows an odd run of backslashes.
func escaped(s string, i int) bool {
	n := 0
	for i--; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

var valueName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// splitValues splits "a=1, b=\"x, y\"" into 1 and "x, y" (quoted).
func splitValues(s string) []string {
	var vals []string
	start, quoted := 0, false
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] == '"' && !escaped(s, i) {
			quoted = !quoted
		}
		if i == len(s) || !quoted && strings.HasPrefix(s[i:], ", ") {
			if v := s[start:i]; v != "" {
				vals = append(vals, valueName.ReplaceAllString(v, ""))
			}
			start = i + 2
		}
	}
	return vals
}

// traceJSON is one event of trace -json.
type traceJSON struct {
	Time      time.Time
	PID, TID  int
	Provider  string
	Probe     string
	Goroutine *uint64
	Function  string
	Args      jsonObject
	Results   jsonObject
	ElapsedNS *int64 `json:"elapsed_ns"`
}

func parseTraceJSON(t *testing.T, out string) []traceJSON {
	t.Helper()
	var events []traceJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	for dec.More() {
		var e traceJSON
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("-json output does not parse: %v\n%s", err, out)
		}
		if e.Time.IsZero() || e.PID == 0 || e.TID == 0 || e.Provider == "" || e.Probe == "" {
			t.Fatalf("-json event without time, pid, tid, provider or probe: %+v", e)
		}
		events = append(events, e)
	}
	return events
}

// alphabet is what the types fixture's lens(n) passes: n bytes of the
// alphabet repeated.
func alphabet(n int) string { return strings.Repeat("abcdefghijklmnopqrstuvwxyz", 12)[:n] }

// TestTraceValues traces the types fixture on the build routes and checks
// trace's values against the fixture's inputs, as bpftrace (wantValues, in
// TestArguments) and gdb (TestGDB) read them on the same probes; then
// strings of 0, 1, 255, 256, 257 and 300 bytes: a probe passes its first
// 256 bytes (runtime.CStringMax), and trace shows them all, as gdb and
// bpftrace 0.27 do.
// On the cgo routes the notes come from the C assembler, and the kinds
// from the table the same file puts in a section of its own.
func TestTraceValues(t *testing.T) {
	requireAMD64(t)
	requireBPF(t)
	dir := fixture(t, "types")
	for _, r := range []route{routeA, {name: "a-pie", toolexec: true, flags: []string{"-buildmode=pie"}}, routeB, routeC, {name: "b-pie", cgo: true, flags: []string{"-buildmode=pie"}}} {
		t.Run(r.name, func(t *testing.T) {
			bin := build(t, dir, r)
			got := traceTypes(t, bin, "once")
			for _, want := range wantValues {
				name, _, _ := strings.Cut(want, " ")
				// bpftrace's string copy is its own length: strs is below.
				if name == "strs" {
					continue
				}
				vals := got[name][0]
				if len(vals) > 6 {
					vals = vals[:6] // bpftrace 0.17 reads six
				}
				want = strings.ReplaceAll(want, "PTR", got["ptr"][0][0])
				// bpftrace's form: hex without 0x, bools as 1 and 0.
				line := strings.NewReplacer("0x", "", "true", "1", "false", "0").Replace(name + " " + strings.Join(vals, " "))
				if line != want {
					t.Errorf("trace read %q, bpftrace %q", line, want)
				}
			}
			// gdb's: all twelve, the string's 256 bytes.
			if line := "twelve " + strings.Join(got["twelve"][0], " "); line != "twelve 0 -1 2 -3 4 -5 6 -7 8 -9 10 -11" {
				t.Errorf("trace read %q", line)
			}
			long := strings.Repeat("0123456789", 30)[:256]
			if want := []string{`""`, strconv.Quote("héllo, 世界"), strconv.Quote(long), `"plain"`}; !slices.Equal(got["strs"][0], want) {
				t.Errorf("trace read strs %q, want %q", got["strs"][0], want)
			}
			q := func(n int) string { return strconv.Quote(alphabet(n)) }
			want := [][]string{
				{q(0), q(1), q(255), q(256)}, // 300 bytes cut to 256
				{q(256), q(256), q(0), q(0)}, // 257 cut to 256
			}
			if got := traceTypes(t, bin, "lens")["strs"]; !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("trace read strs\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// traceTypes traces the types fixture in mode and returns the values of
// each probe's events by probe name, and under "ptr" the pointer it
// printed, in hex without 0x.
func traceTypes(t *testing.T, bin, mode string) map[string][][]string {
	t.Helper()
	requireTraceable(t, bin)
	out, errOut, err := usdtTrace(t, "--", bin, mode)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	m := ptrLine.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("the fixture printed no pointer:\n%s", errOut)
	}
	got := map[string][][]string{"ptr": {{m[1]}}}
	for _, l := range parseTrace(t, out) {
		name := strings.TrimPrefix(l.label, "types:")
		got[name] = append(got[name], l.vals)
	}
	return got
}

// TestTracePairs traces hop, whose 50 goroutines move between threads
// during every call: each exit must follow its own goroutine's entry, with
// the result of that entry's arguments and an elapsed time that agrees
// with the two events' timestamps.
func TestTracePairs(t *testing.T) {
	requireAMD64(t)
	bin := buildFixtureRules(t, "hop")
	eachTransport(t, func(t *testing.T, transport string) { testPairs(t, bin, transport) })
}

func testPairs(t *testing.T, bin, transport string) {
	out, errOut, err := usdtTrace(t, "-transport", transport, "-json", "--", bin)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	workerG := map[string]string{} // worker -> goroutine id, as it printed
	for _, m := range regexp.MustCompile(`worker (\d+) g=(\d+)`).FindAllStringSubmatch(errOut, -1) {
		workerG[m[1]] = m[2]
	}
	if len(workerG) != 50 {
		t.Fatalf("the fixture printed %d goroutine ids, want 50:\n%s", len(workerG), errOut)
	}
	type call struct {
		worker, round int
		at            time.Time
	}
	open := map[uint64]*call{} // goroutine -> its call in progress
	var entries, exits int
	var skew []time.Duration
	tids := map[uint64]map[int]bool{}
	for _, e := range parseTraceJSON(t, out) {
		if e.Function != "main.hop" || e.Goroutine == nil {
			t.Fatalf("event of %q without goroutine: %+v", e.Function, e)
		}
		g := *e.Goroutine
		if tids[g] == nil {
			tids[g] = map[int]bool{}
		}
		tids[g][e.TID] = true
		if e.ElapsedNS == nil {
			entries++
			if keys := e.Args.keys(); keys != "gid worker round" {
				t.Fatalf("entry arguments named %q, want hop's parameters gid worker round", keys)
			}
			args := jsonInts(t, e.Args.values())
			if len(args) != 3 || uint64(args[0]) != g || workerG[fmt.Sprint(args[1])] != fmt.Sprint(g) {
				t.Fatalf("entry on g=%d with arguments %v: want its own goroutine id and worker", g, e.Args)
			}
			if open[g] != nil {
				t.Fatalf("g=%d entered hop twice without an exit", g)
			}
			open[g] = &call{int(args[1]), int(args[2]), e.Time}
			continue
		}
		exits++
		c := open[g]
		if c == nil {
			t.Fatalf("exit on g=%d without an entry: %+v", g, e)
		}
		delete(open, g)
		if keys := e.Results.keys(); keys != "r1" {
			t.Fatalf("exit results named %q, want hop's one unnamed result r1", keys)
		}
		if res := jsonInts(t, e.Results.values()); len(res) != 1 || res[0] != int64(c.worker*1000+c.round) {
			t.Errorf("g=%d hop(worker %d, round %d) = %v, want %d", g, c.worker, c.round, e.Results, c.worker*1000+c.round)
		}
		elapsed := time.Duration(*e.ElapsedNS)
		if elapsed < 200*time.Microsecond {
			t.Errorf("g=%d: elapsed %v, but hop sleeps 200µs", g, elapsed)
		}
		skew = append(skew, (e.Time.Sub(c.at) - elapsed).Abs())
	}
	if entries != 50*20 || exits != 50*20 || len(open) != 0 {
		t.Fatalf("%d entries and %d exits, %d open, want 1000 each", entries, exits, len(open))
	}
	// The runtime's clock and the probes' timestamps differ by the few
	// instructions between them, and by a preemption there, rarely.
	sort.Slice(skew, func(i, j int) bool { return skew[i] < skew[j] })
	if med, worst := skew[len(skew)/2], skew[len(skew)-1]; med > 20*time.Microsecond || worst > 5*time.Millisecond {
		t.Errorf("elapsed differs from the events' timestamps by %v (median), %v (worst)", med, worst)
	}
	hopped := 0
	for _, ts := range tids {
		if len(ts) > 1 {
			hopped++
		}
	}
	if hopped == 0 {
		t.Errorf("no goroutine changed threads: the test proves nothing")
	}
	t.Logf("%d of 50 goroutines ran on more than one thread; elapsed vs timestamps: median %v, worst %v", hopped, skew[len(skew)/2], skew[len(skew)-1])
}

// jsonObject is a -json object's fields in the order trace writes them,
// arguments as declared, which a map would lose.
type jsonObject []jsonField

type jsonField struct {
	Key   string
	Value any
}

func (o *jsonObject) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%s is no JSON object", b)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		f := jsonField{Key: key.(string)}
		if err := dec.Decode(&f.Value); err != nil {
			return err
		}
		*o = append(*o, f)
	}
	return nil
}

// keys are the object's keys in order, separated by spaces.
func (o jsonObject) keys() string {
	var keys []string
	for _, f := range o {
		keys = append(keys, f.Key)
	}
	return strings.Join(keys, " ")
}

func (o jsonObject) values() []any {
	var vals []any
	for _, f := range o {
		vals = append(vals, f.Value)
	}
	return vals
}

// jsonInts converts -json integer values.
func jsonInts(t *testing.T, vals []any) []int64 {
	t.Helper()
	var ints []int64
	for _, v := range vals {
		n, ok := v.(json.Number)
		if !ok {
			t.Fatalf("value %v (%T) is no integer", v, v)
		}
		i, err := n.Int64()
		if err != nil {
			t.Fatal(err)
		}
		ints = append(ints, i)
	}
	return ints
}

// TestTraceExitReads traces exit probes fired by deferred calls, which
// read the results through their addresses: every kind of read (narrow
// integers, bools, float bits, slices and interfaces (read through their
// addresses), pointers), shared by the functions whose results are as many words and
// spelled out for strings and for more than three results. Each must pass
// what the fixture itself sees its calls return.
//
// Then again through the smallest ring buffer, 4K, the fixture pausing
// 200 ms after each round of calls, which trace reads long before the
// next: a record with values takes the bytes its
// reads filled, so a round's ten records fit, where the program's whole
// scratch record (bpfprog.RecEnd, 5.7K) would fit none.
func TestTraceExitReads(t *testing.T) {
	requireAMD64(t)
	bin := buildFixtureRules(t, "exitreads")
	eachTransport(t, func(t *testing.T, transport string) { testExitReads(t, bin, transport) })
}

func testExitReads(t *testing.T, bin, transport string) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default", []string{"--", bin}},
		{"buffer-4K", []string{"-buffer", "4K", "--", bin, "paced"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := usdtTrace(t, append([]string{"-transport", transport}, tc.args...)...)
			if err != nil {
				t.Fatalf("trace: %v\n%s", err, errOut)
			}
			var want, got []string
			for _, line := range strings.Split(errOut, "\n") {
				if w, ok := strings.CutPrefix(line, "want "); ok {
					want = append(want, w)
				}
			}
			for _, l := range parseTrace(t, out) {
				if l.exit {
					got = append(got, strings.Join(append([]string{l.label}, l.vals...), " "))
				}
			}
			if len(want) != 20 {
				t.Fatalf("the fixture printed %d calls, want 20:\n%s", len(want), errOut)
			}
			if !slices.Equal(got, want) {
				t.Errorf("exit probes passed\n%s\nwant\n%s\ntrace said:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), errOut)
			}
		})
	}
}

// buildFixtureRules builds testdata/name with the probes its rules.yml
// selects, and returns the executable.
func buildFixtureRules(t *testing.T, name string) string {
	return buildFixtureRulesFor(t, target{}, name)
}

// buildFixtureRulesFor is buildFixtureRules for tg; in guest mode it
// takes the host's build.
func buildFixtureRulesFor(t *testing.T, tg target, name string) string {
	t.Helper()
	if guestDir != "" {
		return prebuilt(t, name, "rules")
	}
	return memoBuild(t, "fixture\x00"+tg.goarch+"\x00"+name, func() string {
		dir := fixture(t, name)
		bin := filepath.Join(t.TempDir(), name)
		r := routeA
		r.target = tg
		goCmd(t, dir, r.env(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
		return bin
	})
}
