package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestTraceExampleProvider traces examples/provider, attached each way
// trace can (one uprobe per site is what kernels before 6.6 get), and
// through the in-process ring, built without cgo and with it: every
// job's three events carry its id, and the same kind, worker and outcome
// as the program's own count of failures.
func TestTraceExampleProvider(t *testing.T) {
	requireAMD64(t)
	binA := buildJobs(routeA)(t)
	// Kernels without BPF cookies (before 5.15) tell the sites apart by
	// address, which -v says too.
	for _, tt := range []struct{ attach, how string }{
		{"multi", `with one uprobe_multi link in `},
		{"single", `with one uprobe per site(, told apart by address \(this kernel has no BPF cookies\))? in `},
	} {
		t.Run(tt.attach, func(t *testing.T) {
			requireBPF(t)
			traceJobs(t, binA, []string{"-attach", tt.attach}, tt.how)
		})
	}
	for _, r := range guestRoutes(routeA, routeC) {
		t.Run("ring/"+r.name, func(t *testing.T) {
			requireRing(t)
			bin := binA
			if r.name != routeA.name {
				bin = buildJobs(r)(t)
			}
			traceJobs(t, bin, []string{"-transport", "ring"}, `attached 3 probes of process \d+: they record in its own memory`)
		})
	}
}

// traceJobs traces the provider example bin with flags, which -v must
// report as the regular expression how says.
func traceJobs(t *testing.T, bin string, flags []string, how string) {
	const jobs, workers = 40, 4
	args := append(append([]string{"-v"}, flags...), "--", bin, "-jobs", fmt.Sprint(jobs), "-workers", fmt.Sprint(workers), "-every", "1ms")
	out, errOut, err := usdtTrace(t, args...)
	if err != nil {
		if strings.Contains(errOut, "no uprobe_multi link") {
			t.Skipf("this kernel makes no uprobe_multi link (Linux 6.6+ does): %s", errOut)
		}
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	if !regexp.MustCompile(how).MatchString(errOut) {
		t.Errorf("-v does not say it attached as %q says:\n%s", how, errOut)
	}
	m := regexp.MustCompile(`ran (\d+) jobs, (\d+) failed`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("the example did not print its count:\n%s", errOut)
	}
	kinds := []string{`"resize"`, `"thumbnail"`, `"transcode"`, `"checksum"`}
	seen := map[string]map[string][]string{} // probe -> id -> values
	failed := 0
	for _, l := range parseTrace(t, out) {
		probe := strings.TrimPrefix(l.label, "jobs:job__")
		if len(l.vals) < 3 {
			t.Fatalf("%s has %d values: %q", l.label, len(l.vals), l.vals)
		}
		id, kind := l.vals[0], l.vals[1]
		if seen[probe] == nil {
			seen[probe] = map[string][]string{}
		}
		if seen[probe][id] != nil {
			t.Errorf("%s twice for job %s", l.label, id)
		}
		seen[probe][id] = l.vals
		if !slices.Contains(kinds, kind) {
			t.Errorf("%s: kind %s is none of the example's", l.label, kind)
		}
		switch n := func(i int) int64 { v, _ := strconv.ParseInt(l.vals[i], 10, 64); return v }; probe {
		case "enqueued":
			if len(l.vals) != 3 || n(2) < 0 || n(2) > 64 {
				t.Errorf("enqueued %q: depth out of the queue's 0..64", l.vals)
			}
		case "started":
			if len(l.vals) != 4 || n(2) < 0 || n(2) >= workers || n(3) < 0 {
				t.Errorf("started %q: worker out of 0..%d or wait negative", l.vals, workers-1)
			}
		case "done":
			// work sleeps at least a millisecond.
			if len(l.vals) != 4 || n(2) < 1e6 || l.vals[3] != "true" && l.vals[3] != "false" {
				t.Errorf("done %q: run under 1ms or ok no bool", l.vals)
			}
			if l.vals[3] == "false" {
				failed++
			}
		default:
			t.Errorf("unknown probe %s", l.label)
		}
	}
	for id := 1; id <= jobs; id++ {
		for _, probe := range []string{"enqueued", "started", "done"} {
			v := seen[probe][fmt.Sprint(id)]
			if v == nil {
				t.Errorf("no %s event for job %d", probe, id)
			} else if v[1] != seen["enqueued"][fmt.Sprint(id)][1] {
				t.Errorf("job %d: %s with kind %s", id, probe, v[1])
			}
		}
	}
	if fmt.Sprint(failed) != m[2] {
		t.Errorf("trace shows %d failed jobs, the example counted %s", failed, m[2])
	}
}

// cacheValue is the example's *Cache as trace shows it: its entries, as
// many as were read of its map's group, or of a map larger than one
// group, its length.
var cacheValue = regexp.MustCompile(`^&\{mu:\{.*\} entries:map\[(` + cacheEntry + `( ` + cacheEntry + `)*)?( ?\.\.\.\(len \d+\))?\]\}$`)

// cacheEntry is one entry, or one that another worker is storing as the
// probe reads the map, which it does without the cache's lock: its key
// there, its value still zero.
const cacheEntry = `key\d+:\{(value:\[\.\.\.\(len \d+\)\] expires:\S+|value:\[\] expires:0001-01-01T00:00:00Z)\}`

// TestTraceExampleToolexec traces examples/toolexec, whose probes come from
// its rules: on each goroutine every exit closes the call it entered last,
// and every value follows from the key the call was given: the backend
// returns "value of KEY", the cache keeps it for 50ms, a miss is a nil
// slice and a non-nil error. The receiver shows as the cache.
func TestTraceExampleToolexec(t *testing.T) {
	requireAMD64(t)
	bin := buildCache(routeA)(t)
	eachTransport(t, func(t *testing.T, transport string) { traceCache(t, bin, transport) })
}

// traceCache traces the automatic-probe example bin through transport:
// every call's values, each exit paired with its entry on its goroutine.
func traceCache(t *testing.T, bin, transport string) {
	const ops = 40
	out, errOut, err := usdtTrace(t, "-transport", transport, "--", bin, "-ops", fmt.Sprint(ops), "-workers", "4")
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	m := regexp.MustCompile(`cache\((\d+)\)`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("the example did not print its cache:\n%s", errOut)
	}
	isNil := func(v string) bool { return v == "<nil>" }
	valueOf := func(key string) string {
		k, err := strconv.Unquote(key)
		if err != nil {
			t.Fatalf("key %s is no string", key)
		}
		return strconv.Quote("value of " + k)
	}
	stacks := map[string][]traceLine{}
	put := map[string]bool{}
	count := map[string]int{}
	for _, l := range parseTrace(t, out) {
		if l.g == "" {
			t.Fatalf("event without goroutine: %+v", l)
		}
		if !l.exit {
			stacks[l.g] = append(stacks[l.g], l)
			count[l.label]++
			// The receiver shows as the cache it points to, its map
			// growing as keys are put.
			if l.label != "main.main" && l.label != "main.load" && !cacheValue.MatchString(l.vals[0]) {
				t.Errorf("%s on receiver %s, not the cache", l.label, l.vals[0])
			}
			if l.label == "main.(*Cache).Put" {
				key := l.vals[1]
				put[key] = true
				if want := []string{l.vals[0], key, valueOf(key), "50000000"}; !slices.Equal(l.vals, want) {
					t.Errorf("Put%q, want Put%q", l.vals, want)
				}
			}
			continue
		}
		s := stacks[l.g]
		if len(s) == 0 || s[len(s)-1].label != l.label {
			t.Fatalf("g=%s: exit of %s does not close the call it entered last (%v)", l.g, l.label, s)
		}
		in := s[len(s)-1]
		stacks[l.g] = s[:len(s)-1]
		var want []string
		switch l.label {
		case "main.main", "main.(*Cache).Put":
		case "main.(*Cache).Get":
			want = []string{valueOf(in.vals[1]), "<nil>"}
			if l.vals[0] == "[]" && !isNil(l.vals[1]) {
				want = l.vals // a miss: a nil slice and an error
			}
		case "main.fetch":
			want = []string{valueOf(in.vals[1]), "<nil>"}
		case "main.load":
			want = []string{valueOf(in.vals[0]), "<nil>"}
		}
		if !slices.Equal(l.vals, want) {
			t.Errorf("g=%s: %s%q = %q, want %q", l.g, in.label, in.vals, l.vals, want)
		}
	}
	for g, s := range stacks {
		if len(s) > 0 {
			t.Errorf("g=%s: %d calls never exited", g, len(s))
		}
	}
	if count["main.main"] != 1 || count["main.fetch"] != ops || count["main.(*Cache).Get"] != ops || count["main.load"] != count["main.(*Cache).Put"] {
		t.Errorf("calls %v: want main once, fetch and Get %d times, as many loads as Puts", count, ops)
	}
	if fmt.Sprint(len(put)) != m[1] {
		t.Errorf("trace shows Puts of %d keys, the example's cache holds %s", len(put), m[1])
	}
}

// buildCache builds examples/toolexec with its rules on route r.
func buildCache(r route) func(t *testing.T) string {
	return func(t *testing.T) string {
		if guestDir != "" {
			return prebuilt(t, "cache", r.name)
		}
		dir := filepath.Join(repoRoot, "examples", "toolexec")
		bin := filepath.Join(t.TempDir(), "cache")
		goCmd(t, dir, r.env(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
		return bin
	}
}
