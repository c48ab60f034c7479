package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/sdtnote"
)

// namesCase is one binary whose probes' argument names the tests check:
// what list shows for each probe, and the events trace prints for a run.
type namesCase struct {
	name  string
	build func(t *testing.T) string
	run   []string // the binary's arguments
	list  map[string]string
	// trace is the events of the run, the time and pid, tid or goroutine
	// taken away; an element is a regular expression.
	trace []string
	// json is the argument or result names of each -json event, in order.
	json []string
	// concurrent says the events come from more than one goroutine, so
	// their order is the scheduler's: jobs fires job__enqueued after its
	// send, and the worker may fire job__started first.
	concurrent bool
}

var namesCases = []namesCase{
	{
		name:  "usdtgen",
		build: buildJobs(routeA),
		run:   []string{"-jobs", "1", "-workers", "1"},
		// provider.d's parameter names, with the Go types of usdtgen's
		// functions.
		list: map[string]string{
			"job__enqueued": "id int64, kind string, depth int32",
			"job__started":  "id int64, kind string, worker uint16, wait_ns int64",
			"job__done":     "id int64, kind string, run_ns int64, ok bool",
		},
		trace: []string{
			`jobs:job__enqueued\(id=1, kind="[a-z]+", depth=\d+\)`,
			`jobs:job__started\(id=1, kind="[a-z]+", worker=0, wait_ns=\d+\)`,
			`jobs:job__done\(id=1, kind="[a-z]+", run_ns=\d+, ok=(true|false)\)`,
		},
		json:       []string{"id kind depth", "id kind worker wait_ns", "id kind run_ns ok"},
		concurrent: true,
	},
	{
		// The cgo route's notes come from the C assembler, and the names
		// from the table it assembles beside them.
		name:  "usdtgen cgo",
		build: buildJobs(routeB),
		run:   []string{"-jobs", "1", "-workers", "1"},
		list: map[string]string{
			"job__enqueued": "id int64, kind string, depth int32",
			"job__started":  "id int64, kind string, worker uint16, wait_ns int64",
			"job__done":     "id int64, kind string, run_ns int64, ok bool",
		},
		trace: []string{
			`jobs:job__enqueued\(id=1, kind="[a-z]+", depth=\d+\)`,
			`jobs:job__started\(id=1, kind="[a-z]+", worker=0, wait_ns=\d+\)`,
			`jobs:job__done\(id=1, kind="[a-z]+", run_ns=\d+, ok=(true|false)\)`,
		},
		json:       []string{"id kind depth", "id kind worker wait_ns", "id kind run_ns ok"},
		concurrent: true,
	},
	{
		name: "automatic",
		build: func(t *testing.T) string {
			dir := fixture(t, "names")
			bin := filepath.Join(t.TempDir(), "names")
			goCmd(t, dir, buildEnv(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
			return bin
		},
		// The receiver, parameter and result names testdata/names/main.go
		// declares; a blank or unnamed one has none, and the two
		// parameters wide has no room for are listed as dropped.
		list: map[string]string{
			"entry__main__Cache__Get": "goid int64, c *Cache, key string",
			"exit__main__Cache__Get":  "goid int64, elapsed time.Duration, val string, ok bool",
			"entry__main__blank":      "goid int64, _ int, label string",
			"exit__main__blank":       "goid int64, elapsed time.Duration, int",
			"entry__main__unnamed":    "goid int64, int, string",
			"exit__main__unnamed":     "goid int64, elapsed time.Duration, int, error",
			"entry__main__wide":       "goid int64, a1 int, a2 int, a3 int, a4 int, a5 int, a6 int, a7 int, a8 int, a9 int, a10 int, a11 int, dropped: a12 int, a13 int",
			"exit__main__wide":        "goid int64, elapsed time.Duration, int",
		},
		// Where there is no name, a parameter shows as bpftrace's argN
		// (arg0 is the goroutine id) and a result as rN.
		trace: []string{
			`main\.\(\*Cache\)\.Get\(c=&\{m:map\[k17:v17\]\}, key="k17"\)`,
			`main\.\(\*Cache\)\.Get = \(val="v17", ok=true\) ELAPSED`,
			`main\.unnamed\(arg1=3, arg2="x"\)`,
			`main\.unnamed = \(r1=0, r2=unnamed\) ELAPSED`,
			`main\.blank\(arg1=1, label="abc"\)`,
			`main\.blank = \(r1=3\) ELAPSED`,
			`main\.wide\(a1=1, a2=2, a3=3, a4=4, a5=5, a6=6, a7=7, a8=8, a9=9, a10=10, a11=11; dropped: a12, a13\)`,
			`main\.wide = \(r1=14\) ELAPSED`,
		},
		json: []string{"c key", "val ok", "arg1 arg2", "r1 r2", "arg1 label", "r1", "a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11", "r1"},
	},
	{
		// A probe table in the format usdtgen wrote before tables carried
		// names: testdata/oldtable holds that usdtgen's output, which the
		// fixture does not regenerate. Its arguments keep their kinds and
		// show as argN.
		name: "old table",
		build: func(t *testing.T) string {
			bin := filepath.Join(t.TempDir(), "oldtable")
			goCmd(t, fixture(t, "oldtable"), routeA.env(), routeA.buildArgs(bin)...)
			return bin
		},
		list:  map[string]string{"hit": "arg0 int64, arg1 string"},
		trace: []string{`old:hit\(arg0=7, arg1="seven"\)`},
		json:  []string{"arg0 arg1"},
	},
}

// buildJobs builds examples/provider on route r.
func buildJobs(r route) func(t *testing.T) string {
	return func(t *testing.T) string {
		if guestDir != "" {
			return prebuilt(t, "jobs", r.name)
		}
		bin := filepath.Join(t.TempDir(), "jobs")
		goCmd(t, filepath.Join(repoRoot, "examples", "provider"), r.env(), r.buildArgs(bin)...)
		return bin
	}
}

// examplesDir is the directory of examples/name.
func examplesDir(name string) func(*testing.T) string {
	return func(*testing.T) string { return filepath.Join(repoRoot, "examples", name) }
}

// crossListCase is a program TestCrossArm64 lists built for amd64 and for
// arm64.
type crossListCase struct {
	name  string
	route route
	dir   func(t *testing.T) string // the main package
	rules string                    // usdt-toolexec's rules file in dir, if any
	want  map[string]string         // what list shows on both, if known
}

// crossListCases are usdtgen's probes on both routes, and automatic probes.
var crossListCases = []crossListCase{
	{"types/a", routeA, func(t *testing.T) string { return fixture(t, "types") }, "", nil},
	{"types/b", routeB, func(t *testing.T) string { return fixture(t, "types") }, "", nil},
	// namesCases' usdtgen and usdtgen cgo: the same names as on amd64.
	{"provider/a", routeA, examplesDir("provider"), "", namesCases[0].list},
	{"provider/b", routeB, examplesDir("provider"), "", namesCases[1].list},
	{"toolexec/a", routeA, examplesDir("toolexec"), "rules.yml", nil},
}

// build builds c in the environment env.
func (c crossListCase) build(t *testing.T, env []string) string {
	t.Helper()
	dir, bin := c.dir(t), filepath.Join(t.TempDir(), "bin")
	args := c.route.buildArgs(bin)
	if c.rules != "" {
		args = []string{"build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, c.rules)), "."}
	}
	goCmd(t, dir, env, args...)
	return bin
}

// listArgs runs usdt-toolexec list on bin and returns each probe's ARGS
// and SPEC columns.
func listArgs(t *testing.T, bin string) (args, specs map[string]string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "list", bin).Output()
	if err != nil {
		t.Fatalf("usdt-toolexec list: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	header := lines[0]
	argsAt, specAt := strings.Index(header, "ARGS"), strings.Index(header, "SPEC")
	if argsAt < 0 || specAt < argsAt {
		t.Fatalf("list header %q has no ARGS and SPEC columns", header)
	}
	args, specs = map[string]string{}, map[string]string{}
	for _, l := range lines[1:] {
		name := strings.Fields(l)[1]
		args[name] = strings.TrimSpace(l[argsAt:min(specAt, len(l))])
		specs[name] = strings.TrimSpace(l[min(specAt, len(l)):])
	}
	return args, specs
}

// TestNames checks the names list shows against the program's
// declarations, each being the note's argument of that position (the
// list's specs are the ones readelf reads from the notes), and that trace
// calls each value by its name, in text and as -json keys.
func TestNames(t *testing.T) {
	requireAMD64(t)
	for _, tt := range namesCases {
		t.Run(tt.name, func(t *testing.T) {
			bin := tt.build(t)
			t.Run("list", func(t *testing.T) { tt.testList(t, bin) })
			t.Run("trace", func(t *testing.T) { tt.testTrace(t, bin) })
		})
	}
}

func (tt namesCase) testList(t *testing.T, bin string) {
	args, specs := listArgs(t, bin)
	for probe, want := range tt.list {
		if args[probe] != want {
			t.Errorf("list shows %s's arguments as %q, want %q", probe, args[probe], want)
		}
	}
	notes := readelfNotes(t, bin)
	if len(notes) != len(tt.list) {
		t.Errorf("readelf reads %d notes, want %d", len(notes), len(tt.list))
	}
	for _, n := range notes {
		if specs[n.name] != n.args {
			t.Errorf("list shows %s's spec as %q, readelf %q", n.name, specs[n.name], n.args)
		}
		if got, want := len(sdtnote.SplitArgs(n.args)), len(strings.Split(tt.list[n.name], ", ")); !strings.Contains(tt.list[n.name], "dropped") && got != want {
			t.Errorf("%s: the note has %d arguments, list names %d", n.name, got, want)
		}
	}
}

var (
	eventHead    = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{6} (pid=\d+ tid=\d+|g=\d+) `)
	eventElapsed = regexp.MustCompile(` [0-9.]+(ns|µs|ms|s)$`)
)

func (tt namesCase) testTrace(t *testing.T, bin string) {
	requireBPF(t)
	out, errOut, err := usdtTrace(t, append([]string{"--", bin}, tt.run...)...)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(tt.trace) {
		t.Fatalf("trace printed %d events, want %d:\n%s", len(lines), len(tt.trace), out)
	}
	matched := make([]bool, len(tt.trace))
	for i, line := range lines {
		got := eventElapsed.ReplaceAllString(eventHead.ReplaceAllString(line, ""), " ELAPSED")
		candidates := []int{i}
		if tt.concurrent {
			candidates = candidates[:0]
			for j := range tt.trace {
				if !matched[j] {
					candidates = append(candidates, j)
				}
			}
		}
		found := false
		for _, j := range candidates {
			if regexp.MustCompile("^" + tt.trace[j] + "$").MatchString(got) {
				matched[j], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("event %d is\n\t%s\nwant one of\n\t%s", i, got, strings.Join(pick(tt.trace, candidates), "\n\t"))
		}
	}

	out, errOut, err = usdtTrace(t, append([]string{"-json", "--", bin}, tt.run...)...)
	if err != nil {
		t.Fatalf("trace -json: %v\n%s", err, errOut)
	}
	var keys []string
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var ev struct{ Args, Results jsonObject }
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("-json output does not parse: %v\n%s", err, out)
		}
		if ev.Args == nil {
			ev.Args = ev.Results
		}
		keys = append(keys, ev.Args.keys())
	}
	want := slices.Clone(tt.json)
	if tt.concurrent {
		slices.Sort(keys)
		slices.Sort(want)
	}
	if strings.Join(keys, "\n") != strings.Join(want, "\n") {
		t.Errorf("-json events have the keys\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
}

func pick(s []string, indexes []int) []string {
	var picked []string
	for _, i := range indexes {
		picked = append(picked, s[i])
	}
	return picked
}
