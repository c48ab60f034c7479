package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestTraceValuesCorpus traces testdata/values, which calls functions
// with structs (nested, embedded, generic), pointers (nil, a cycle),
// arrays (one past the read budget), maps, interfaces (one holding a
// struct), the errors of errors.New, fmt.Errorf's %w and os.Open, a time
// and a duration, generic functions with a type parameter of int, string
// and a struct, and slices as arguments and results (nil, empty, past the
// read budget, of structs, strings and pointers, and []byte, valid UTF-8
// or not, past its 64 bytes), and prints what Go makes of each value:
// %+v, encoding/json, and the %+v of what each pointer points to (for a
// []byte, the text trace shows, written by hand). Every value
// trace prints, in text and in -json, must be what Go printed, on a
// normal, a stripped and a position-independent build (whose interfaces'
// types trace finds where the process loaded it).
// Only where the fixture marks a value as past the read budget may trace
// cut it: a list shows exactly the start the fixture names (16
// elements), then Go's length; a map of more than 8 entries shows its
// length alone.
// Each value is read through both transports: by the BPF program, and
// by the program itself into its in-process ring.
func TestTraceValuesCorpus(t *testing.T) {
	requireAMD64(t)
	dir := fixture(t, "values")
	for _, variant := range valuesVariants {
		if variant.name != "plain" && guestDir != "" {
			// Where trace finds types and the ring without a symbol
			// table is the host's work, the same on every kernel;
			// the kernel reads a PIE's memory as a plain binary's,
			// and tells its sites apart by cookies (TestAuto/Trace).
			continue
		}
		t.Run(variant.name, func(t *testing.T) {
			eachTransport(t, func(t *testing.T, transport string) {
				testValuesCorpus(t, buildValues(t, dir, target{}, variant), transport)
			})
		})
	}
}

// testValuesCorpus traces bin, the values fixture, through transport,
// and checks every value trace prints against Go's.
func testValuesCorpus(t *testing.T, bin, transport string) {
	if transport == "bpf" {
		requireTraceable(t, bin)
	}
	out, errOut, err := usdtTrace(t, "-transport", transport, "--", bin)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	want := goValues(t, errOut)
	got := traceValuesText(t, out, want)
	if len(got) != len(want) {
		t.Fatalf("trace printed %d values, Go %d:\n%s\n%s", len(got), len(want), out, errOut)
	}
	// In a guest, -json would print the same reads: the host checks it.
	var gotJSON []json.RawMessage
	if guestDir == "" {
		jsonOut, errOut, err := usdtTrace(t, "-json", "-transport", transport, "--", bin)
		if err != nil {
			t.Fatalf("trace -json: %v\n%s", err, errOut)
		}
		if gotJSON = traceValuesJSON(t, jsonOut); len(gotJSON) != len(want) {
			t.Fatalf("trace -json wrote %d values, Go %d:\n%s\n%s", len(gotJSON), len(want), jsonOut, errOut)
		}
	}
	for i, w := range want {
		label := w.fn + " " + w.name
		if g := got[i]; g != w.expanded() && !(w.past && (cutMatches(g, w.text, w.shown) || w.shown == 0 && mapMatches(g, w.json))) {
			t.Errorf("%s: trace printed %s, Go %s", label, g, w.expanded())
		}
		if w.json == "" || gotJSON == nil {
			continue // Go has no JSON of a cycle, or -json did not run
		}
		var gv, wv any
		json.Unmarshal([]byte(w.json), &wv)
		json.Unmarshal(gotJSON[i], &gv)
		if !reflect.DeepEqual(gv, wv) && !(w.past && (prefixMatches(gv, wv, got[i], w.shown) || w.shown == 0 && mapMatches(got[i], w.json) && gv == got[i])) {
			t.Errorf("%s: trace -json wrote %s, Go %s", label, gotJSON[i], w.json)
		}
	}
}

// valuesVariant is a build of testdata/values the corpus is traced on.
type valuesVariant struct{ name, ldflags, buildmode string }

var valuesVariants = []valuesVariant{{"plain", "", "default"}, {"stripped", "-s -w", "default"}, {"pie", "", "pie"}}

// buildValues builds variant of the values fixture in dir for tg; in
// guest mode it takes the one the host built.
func buildValues(t *testing.T, dir string, tg target, variant valuesVariant) string {
	t.Helper()
	if guestDir != "" {
		return prebuilt(t, "values", variant.name)
	}
	bin := filepath.Join(t.TempDir(), "values")
	r := routeA
	r.target = tg
	goCmd(t, dir, r.env(), "build", "-o", bin, "-ldflags="+variant.ldflags, "-buildmode="+variant.buildmode, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	return bin
}

// goValue is one value as the fixture printed it.
type goValue struct {
	fn, name, text, json string
	// ptrs are what the pointers in it point to, by address, root the
	// value's own address when it is a pointer.
	ptrs map[string]string
	root string
	// past marks a value past trace's read budget, of which it shows
	// the first shown elements (a map: none).
	past  bool
	shown int
}

// expanded is the %+v text with each pointer's address replaced by what
// it points to, but for those on the way to it (a cycle).
func (v goValue) expanded() string {
	on := map[string]bool{v.root: true}
	var expand func(s string) string
	addr := regexp.MustCompile(`0x[0-9a-f]+`)
	expand = func(s string) string {
		return addr.ReplaceAllStringFunc(s, func(a string) string {
			to, ok := v.ptrs[a]
			if !ok || on[a] {
				return a
			}
			on[a] = true
			defer delete(on, a)
			return "&" + expand(to)
		})
	}
	return expand(v.text)
}

func goValues(t *testing.T, stderr string) []goValue {
	t.Helper()
	var vals []goValue
	for _, line := range strings.Split(stderr, "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "want":
			f := strings.SplitN(rest, " ", 3)
			vals = append(vals, goValue{fn: f[0], name: f[1], text: f[2], ptrs: map[string]string{}})
		case "json":
			f := strings.SplitN(rest, " ", 3)
			vals[len(vals)-1].json = f[2]
		case "past":
			v := &vals[len(vals)-1]
			v.past = true
			v.shown, _ = strconv.Atoi(rest)
		case "ptr":
			v := &vals[len(vals)-1]
			a, text, _ := strings.Cut(rest, " ")
			if strings.HasPrefix(v.text, "&") && len(v.ptrs) == 0 {
				v.root = a
			}
			v.ptrs[a] = text
		}
	}
	if len(vals) == 0 {
		t.Fatalf("the fixture printed no values:\n%s", stderr)
	}
	return vals
}

// traceValuesText splits the values of trace's events for the fixture's
// functions by the names Go printed, in order, top-level strings
// unquoted.
func traceValuesText(t *testing.T, out string, want []goValue) []string {
	t.Helper()
	var got []string
	i := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := regexp.MustCompile(`^\S+ g=\d+ (main\.\w+)(?: = )?\((.*)\)(?: \S+)?$`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not an event: %q", line)
		}
		list := m[2]
		for first := true; i < len(want) && list != ""; first = false {
			w := want[i]
			prefix := w.name + "="
			if !first {
				prefix = ", " + prefix
			}
			if !strings.HasPrefix(list, prefix) {
				break
			}
			list = list[len(prefix):]
			end := len(list)
			if i+1 < len(want) {
				if k := strings.Index(list, ", "+want[i+1].name+"="); k >= 0 {
					end = k
				}
			}
			v := list[:end]
			if s, err := strconv.Unquote(v); err == nil {
				v = s
			}
			got = append(got, v)
			list = list[end:]
			i++
		}
	}
	return got
}

// traceValuesJSON is the values of trace -json's events, in order.
func traceValuesJSON(t *testing.T, out string) []json.RawMessage {
	t.Helper()
	var vals []json.RawMessage
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct {
			Args, Results json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		obj := ev.Args
		if obj == nil {
			obj = ev.Results
		}
		// In the order written.
		dec := json.NewDecoder(strings.NewReader(string(obj)))
		dec.Token()
		for dec.More() {
			dec.Token()
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			vals = append(vals, v)
		}
	}
	return vals
}

var cutList = regexp.MustCompile(`^\[(.*) \.\.\.\(len (\d+)\)\]$`)

// cutMatches reports whether got is a list trace cut after its first
// shown elements, which start Go's list goText, and which gives the
// length of Go's.
func cutMatches(got, goText string, shown int) bool {
	m := cutList.FindStringSubmatch(got)
	if m == nil {
		return false
	}
	elems := strings.Fields(strings.Trim(goText, "[]"))
	return m[2] == strconv.Itoa(len(elems)) && len(elems) > shown &&
		strings.Join(elems[:shown], " ") == m[1]
}

// mapMatches reports whether got is the length of the map Go wrote as
// the JSON object goJSON, where trace shows no entries (a map larger
// than a group).
func mapMatches(got, goJSON string) bool {
	var m map[string]any
	return json.Unmarshal([]byte(goJSON), &m) == nil && got == fmt.Sprintf("map[...(len %d)]", len(m))
}

// prefixMatches reports whether the JSON array got is the first shown
// elements of Go's, where trace cut the list.
func prefixMatches(got, want any, text string, shown int) bool {
	g, ok1 := got.([]any)
	w, ok2 := want.([]any)
	return ok1 && ok2 && cutList.MatchString(text) && len(g) == shown && len(w) > shown && reflect.DeepEqual(g, w[:shown])
}

// TestTraceNoValues traces the values fixture with -values=false through
// each transport: the same events as with the values, and in them the
// words the probes hold and nothing those point to: a pointer or a map
// argument its address, a string in a struct its length, a struct passed
// by value its own fields, a nil error nil and a non-nil one not.
func TestTraceNoValues(t *testing.T) {
	requireAMD64(t)
	bin := buildValues(t, fixture(t, "values"), target{}, valuesVariants[0])
	eachTransport(t, func(t *testing.T, transport string) {
		if transport == "bpf" {
			requireTraceable(t, bin)
		}
		events := func(flags ...string) []traceJSON {
			out, errOut, err := usdtTrace(t, append(append([]string{"-json", "-transport", transport}, flags...), "--", bin)...)
			if err != nil {
				t.Fatalf("trace %q: %v\n%s", flags, err, errOut)
			}
			return parseTraceJSON(t, out)
		}
		with, without := events(), events("-values=false")
		if len(with) != len(without) || len(with) == 0 {
			t.Fatalf("%d events with -values=false, %d with the values", len(without), len(with))
		}
		// value is value name of the first of fn's events in evs that
		// has part ("args" or "results"), with key path under it.
		value := func(evs []traceJSON, fn, part, name string, path ...string) (any, bool) {
			for _, ev := range evs {
				vals := map[string]jsonObject{"args": ev.Args, "results": ev.Results}[part]
				if ev.Function != fn || vals == nil {
					continue
				}
				i := slices.IndexFunc(vals, func(f jsonField) bool { return f.Key == name })
				if i < 0 {
					return nil, false
				}
				v, ok := vals[i].Value, true
				for _, k := range path {
					m, _ := v.(map[string]any)
					v, ok = m[k]
				}
				return v, ok
			}
			return nil, false
		}
		for i, ev := range without {
			if ev.Probe != with[i].Probe {
				t.Fatalf("event %d is %v with -values=false, %v with the values", i, ev.Probe, with[i].Probe)
			}
		}
		for _, c := range []struct {
			fn, part, name string
			path           []string
			want           func(any) bool
			says           string
		}{
			{"main.Ship", "args", "a", nil, isNumber, "a pointer argument: its address"},
			{"main.Walk", "args", "n", nil, isNumber, "a pointer argument: its address"},
			{"main.Count", "args", "m", nil, isNumber, "a map argument: its address"},
			{"main.Place", "args", "o", []string{"Name"}, equals("<12 bytes>"), "a string in a struct passed by value: its length"},
			{"main.Swap", "args", "p", []string{"Key"}, equals("<1 bytes>"), "a string in a struct passed by value: its length"},
			{"main.Nils", "args", "e", nil, equals(nil), "a nil error: nil"},
			{"main.Ship", "results", "err", nil, notEquals(nil), "an error that is not nil: not nil"},
			{"main.Open", "results", "r1", nil, notEquals(nil), "an error that is not nil: not nil"},
		} {
			label := c.fn + " " + c.part + " " + strings.Join(append([]string{c.name}, c.path...), ".")
			got, ok := value(without, c.fn, c.part, c.name, c.path...)
			if !ok || !c.want(got) {
				t.Errorf("%s with -values=false is %v (found %v), want %s", label, got, ok, c.says)
			}
			if def, _ := value(with, c.fn, c.part, c.name, c.path...); c.want(def) && !strings.Contains(c.says, "error") {
				t.Errorf("%s is %v with the values too: the fixture does not tell them apart", label, def)
			}
		}
		// What the probe holds reads the same either way.
		for _, c := range [][]string{{"main.Big", "args", "a"}, {"main.Place", "args", "o", "ID"}, {"main.Open", "args", "path"}} {
			got, _ := value(without, c[0], c[1], c[2], c[3:]...)
			want, ok := value(with, c[0], c[1], c[2], c[3:]...)
			if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s with -values=false is %v, with the values %v (found %v)", strings.Join(c, " "), got, want, ok)
			}
		}
	})
}

func isNumber(v any) bool { _, ok := v.(json.Number); return ok }

func equals(want any) func(any) bool { return func(v any) bool { return v == want } }

func notEquals(not any) func(any) bool { return func(v any) bool { return v != not } }
