package trace

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/go-usdt/usdt/internal/metrics"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
	"github.com/go-usdt/usdt/internal/values"
)

// runStats is trace -stats: it counts the calls of the sites' functions
// and probes, and their latencies, in the kernel, and prints them every
// opt.Interval and at the end.
func runStats(opt Options, selected []site, pidfd int) error {
	sites := statSites(selected)
	l := newStatLayout(sites)
	progSites := make([]bpfprog.StatSite, len(sites))
	for i, s := range sites {
		progSites[i] = bpfprog.StatSite{Addr: s.addr, First: l.first[i]}
		if l.timed[i] {
			progSites[i].Elapsed = &s.args[1]
		}
	}
	objs, err := bpfprog.NewCounters(progSites, l.slots)
	if err != nil {
		return bpfError(err)
	}
	defer objs.Close()
	tasks, err := commandTasks(opt)
	if err != nil {
		return err
	}
	objs.Only(tasks)
	f, err := follow(opt, sites, tasks, objs.Load, pidfd)
	if err != nil {
		return err
	}
	defer f.Close()
	p := statPrinter{opt: opt, sites: sites, layout: l, w: bufio.NewWriter(opt.Stdout), prev: make([]uint64, l.slots), since: time.Now()}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	next := p.since.Add(opt.Interval)
	// Counts gets the counters every countsPollEvery, or less often
	// where a read takes more than a twentieth of the time, as through
	// the ring.
	nextCounts := time.Now()
	for !f.stopped() {
		<-tick.C
		if opt.Interval > 0 && !time.Now().Before(next) {
			if err := p.print(objs.Read); err != nil {
				return err
			}
			next = next.Add(opt.Interval)
		}
		if now := time.Now(); opt.Counts != nil && !now.Before(nextCounts) {
			if c, err := objs.Read(); err == nil {
				// The kernel counts the command and what it starts,
				// or -p's process: one traced process to report.
				opt.Counts(statSnapshot(sites, l, c, objs.RecursionMisses(), 1))
			}
			nextCounts = now.Add(max(countsPollEvery, 20*time.Since(now)))
		}
	}
	if opt.Counts != nil {
		if c, err := objs.Read(); err == nil {
			opt.Counts(statSnapshot(sites, l, c, objs.RecursionMisses(), 0))
		}
	}
	if err := p.print(objs.Read); err != nil {
		return err
	}
	if n := objs.RecursionMisses(); n > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: %d probe hits not counted: the kernel skipped the program while another BPF program ran on the CPU\n", n)
	}
	return f.exit()
}

// timedSite reports whether the calls of s carry their elapsed time: those
// of an automatic exit probe, in arg1, unless its sites are notes, whose
// elapsed time is 0.
func timedSite(s *site) bool { return s.fn != "" && s.exit && len(s.args) >= 2 && s.table.Func == "" }

// statSites picks the sites -stats attaches to: all but the entry probes
// of functions whose exit probe is selected, which counts their calls
// already (an entry probe would add a trap to each call and nothing to
// the counts). The exit probe of a function whose sites are notes counts
// its calls without their times.
func statSites(sites []site) []site {
	byExit := map[string]bool{}
	for i := range sites {
		if s := &sites[i]; timedSite(s) || s.fn != "" && s.exit && s.table.Func != "" {
			byExit[s.fn] = true
		}
	}
	var out []site
	for _, s := range sites {
		if s.fn == "" || s.exit || !byExit[s.fn] {
			out = append(out, s)
		}
	}
	return out
}

// statLayout is where each site's counters are: bpfprog.TimedSlots from first[i]
// for a timed site i, else its count at first[i].
type statLayout struct {
	first []int
	timed []bool
	slots int
}

func newStatLayout(sites []site) statLayout {
	l := statLayout{first: make([]int, len(sites)), timed: make([]bool, len(sites))}
	for i := range sites {
		l.first[i], l.timed[i] = l.slots, timedSite(&sites[i])
		l.slots++
		if l.timed[i] {
			l.slots = l.first[i] + bpfprog.TimedSlots
		}
	}
	return l
}

// funcStats are the counts of one function, or of one provider probe,
// summed over its sites.
type funcStats struct {
	site         *site // the first of them
	timed        bool
	calls, total uint64
	// untimed are the calls counted at sites that carry no elapsed
	// time (notes on a function's own code), of calls.
	untimed uint64
	hist    hist
}

// timedCalls are the calls whose times total and hist hold.
func (fs *funcStats) timedCalls() uint64 { return fs.calls - fs.untimed }

// tally sums the counters of the sites by function or probe.
func tally(sites []site, l statLayout, counters []uint64) []*funcStats {
	byLabel := map[string]*funcStats{}
	var all []*funcStats
	for i := range sites {
		s := &sites[i]
		fs := byLabel[s.label()]
		if fs == nil {
			fs = &funcStats{site: s}
			byLabel[s.label()] = fs
			all = append(all, fs)
		}
		c := counters[l.first[i]:]
		if !l.timed[i] {
			fs.calls += c[0]
			if s.fn != "" {
				fs.untimed += c[0]
			}
			continue
		}
		fs.timed = true
		fs.total += c[0]
		for b, n := range c[1:bpfprog.TimedSlots] {
			fs.hist[b] += n
			fs.calls += n
		}
	}
	return all
}

type statPrinter struct {
	opt    Options
	sites  []site
	layout statLayout
	w      *bufio.Writer
	// prev are the counters as last printed, and since when they count:
	// each print shows what was counted after.
	prev  []uint64
	since time.Time
}

// print prints what the counters read counted since the last print: with
// -interval, under a line that gives the interval's end and length.
func (p *statPrinter) print(read func() ([]uint64, error)) error {
	cur, err := read()
	if err != nil {
		return fmt.Errorf("reading the counts: %w", err)
	}
	now := time.Now()
	defer p.w.Flush()
	delta := make([]uint64, len(cur))
	for i := range cur {
		delta[i] = cur[i] - p.prev[i]
	}
	all := tally(p.sites, p.layout, delta)
	all = slices.DeleteFunc(all, func(fs *funcStats) bool { return fs.calls == 0 })
	slices.SortStableFunc(all, func(a, b *funcStats) int {
		if c := cmp.Compare(b.total, a.total); c != 0 {
			return c
		}
		return cmp.Compare(b.calls, a.calls)
	})
	if p.opt.Interval > 0 && !p.opt.JSON {
		fmt.Fprintf(p.w, "--- %s, %v ---\n", now.Format("15:04:05"), now.Sub(p.since).Round(time.Millisecond))
	}
	for i, fs := range all {
		if p.opt.JSON {
			p.w.Write(append(fs.json(now), '\n'))
			continue
		}
		if i > 0 {
			p.w.WriteByte('\n')
		}
		fs.text(p.w)
	}
	if p.opt.Interval > 0 && !p.opt.JSON {
		p.w.WriteByte('\n')
	}
	p.prev, p.since = cur, now
	return nil
}

func (fs *funcStats) text(w io.Writer) {
	if !fs.timed || fs.timedCalls() == 0 {
		fmt.Fprintf(w, "%s: %d calls\n", fs.site.label(), fs.calls)
		return
	}
	untimed := ""
	if fs.untimed > 0 {
		untimed = fmt.Sprintf(" (%d of them at the notes on its code as compiled, untimed)", fs.untimed)
	}
	fmt.Fprintf(w, "%s: %d calls, total %v, mean %v%s\n", fs.site.label(), fs.calls, time.Duration(fs.total), time.Duration(fs.total/fs.timedCalls()), untimed)
	fs.hist.print(w)
}

func (fs *funcStats) json(now time.Time) []byte {
	o := object{{"time", now.Format(time.RFC3339Nano)}}
	if s := fs.site; s.fn != "" {
		o = append(o, field{"function", s.fn})
	} else {
		o = append(o, field{"provider", s.Provider}, field{"probe", s.Name})
	}
	o = append(o, field{"calls", fs.calls})
	if fs.untimed > 0 {
		o = append(o, field{"untimed", fs.untimed})
	}
	if fs.timed && fs.timedCalls() > 0 {
		var hist []object
		for b, n := range fs.hist {
			if n > 0 {
				lo, hi := bucketBounds(b)
				hist = append(hist, object{{"lo_ns", int64(lo)}, {"hi_ns", int64(hi)}, {"count", n}})
			}
		}
		o = append(o, field{"total_ns", fs.total}, field{"mean_ns", fs.total / fs.timedCalls()}, field{"histogram", hist})
	}
	b, _ := json.Marshal(o)
	return b
}

// statSnapshot is what Options.Counts is handed of counters: each
// function's (or probe's) calls and durations, lost, the events lost
// (through BPF, the probe hits the kernel skipped), and how many
// processes are traced now (0 once the trace has ended). The names are
// escaped (values.Escape): a binary's probe names can be any bytes, and
// both Prometheus's text and protobuf take valid UTF-8 only.
func statSnapshot(sites []site, l statLayout, counters []uint64, lost uint64, processes int) *metrics.Snapshot {
	snap := &metrics.Snapshot{Lost: lost, Processes: processes}
	for _, fs := range tally(sites, l, counters) {
		snap.Functions = append(snap.Functions, metrics.Function{Name: values.Escape(fs.site.label()), Calls: fs.calls, Timed: fs.timed && fs.timedCalls() > 0, SumNs: fs.total, Buckets: slices.Clone(fs.hist[:])})
	}
	return snap
}
