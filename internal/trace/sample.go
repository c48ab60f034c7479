package trace

import (
	"debug/elf"
	"slices"

	"github.com/go-usdt/usdt/internal/metrics"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/ringlayout"
	"github.com/go-usdt/usdt/rules"
)

// The program's own sampling (Options.Sampling): on amd64, the ring's
// writer samples the root calls and writes the events of the calls of
// sampled roots only (ring.Sample), by each site's role (sampleRoles);
// the calls it leaves out it counts (leftLayout), or, where its ring has
// no room for the counters, writes a compact record of each (counted).

// counted hands Options.Counted a call of site that the program's
// sampling left out: its compact record's word.
func (t *ringTrace) counted(s *site, word uint64) {
	c := Counted{
		Name:      countedName(s),
		ErrResult: word>>ringlayout.CompactError&1 != 0,
		Failed:    word>>ringlayout.CompactFailed&1 != 0,
		ByCaller:  word>>ringlayout.CompactCaller&1 != 0,
	}
	if s.exit {
		c.Timed, c.Ns = true, word&(1<<ringlayout.CompactCaller-1)
	}
	t.opt.Counted(c)
}

// countedName is what the metrics count a call of site s under, as
// their consumers count the events: its function (Event.Function), or a
// usdtgen probe's label.
func countedName(s *site) string {
	if s.fn == "" || s.providerRing {
		return s.label()
	}
	return s.fn
}

// samplesInProgram reports whether the program of binary can sample
// its calls as it writes them to the ring: on amd64 (asmgen's record).
func samplesInProgram(binary string) bool {
	f, err := elf.Open(binary)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Machine == elf.EM_X86_64
}

// sampleRoles are the sites' roles for the program's sampling
// (ring.SitePlan's Role): the entry and the exit of a function whose
// entry and exit are both traced, which open and close its calls; the
// exit's last result where it is an error; the entry's incoming trace
// context, a C string, where it passes one.
func sampleRoles(sites []site) []uint16 {
	entries, exits := map[string]bool{}, map[string]bool{}
	for _, s := range sites {
		if s.fn != "" && !s.providerRing {
			if s.exit {
				exits[s.fn] = true
			} else {
				entries[s.fn] = true
			}
		}
	}
	// word is the role's number of argument a: one more than the word
	// of the record that holds it (an automatic probe's first argument,
	// the goroutine, is not one of its words), if it fits in 4 bits.
	word := func(a int) (uint16, bool) { return uint16(a), a >= 1 && a < 16 }
	roles := make([]uint16, len(sites))
	for i, s := range sites {
		role := uint16(ringlayout.FlagKnown)
		switch {
		case s.fn == "" || s.providerRing:
		case s.exit && entries[s.fn]:
			role |= ringlayout.FlagExit
		case !s.exit && exits[s.fn]:
			role |= ringlayout.FlagEntry
		}
		decl := s.table.Args
		if s.fn != "" && !s.providerRing && len(decl) == len(s.args) {
			if last := len(decl) - 1; s.exit && decl[last].Type == "error" {
				if w, ok := word(last); ok {
					role |= w << ringlayout.FlagErrorShift
				}
			}
			for a, arg := range decl {
				if !s.exit && arg.Name == rules.ContextKey && s.strs[a] {
					if w, ok := word(a); ok {
						role |= w << ringlayout.FlagContextShift
					}
				}
			}
		}
		roles[i] = role
	}
	return roles
}

// leftLayout is where the program counts the calls that its sampling
// left out (ring.CountLeftOut): first[i] is site i's first counter; an
// exit is timed (1 + HistBuckets counters, its total and buckets), and
// one whose role names an error result has its errors in the counter
// after those; any other site has a count.
type leftLayout struct {
	first       []int
	timed, errs []bool
	n           int
}

func newLeftLayout(sites []site, roles []uint16) leftLayout {
	l := leftLayout{first: make([]int, len(sites)), timed: make([]bool, len(sites)), errs: make([]bool, len(sites))}
	for i := range sites {
		l.first[i] = l.n
		l.timed[i] = sites[i].exit && !sites[i].providerRing
		l.errs[i] = l.timed[i] && roles[i]>>ringlayout.FlagErrorShift&15 != 0
		switch {
		case l.errs[i]:
			l.n += 2 + ringlayout.HistBuckets
		case l.timed[i]:
			l.n += 1 + ringlayout.HistBuckets
		default:
			l.n++
		}
	}
	return l
}

// ringSites are the sites as ring.CountLeftOut takes them, in a process
// loaded at bias.
func (l leftLayout) ringSites(sites []site, bias uint64) []ring.Site {
	rs := make([]ring.Site, len(sites))
	for i := range sites {
		rs[i] = ring.Site{Addr: sites[i].ringKey() + bias, First: l.first[i], Timed: l.timed[i]}
	}
	return rs
}

// snapshot is what counters (of l, summed over processes) say of the
// calls left out, by function or probe, named as the events' consumers
// count them (Event.Function, or a probe's label), and the calls in all.
func (l leftLayout) snapshot(sites []site, counters []uint64) (*metrics.Snapshot, uint64) {
	fns := make([]metrics.Function, 0, len(sites))
	var calls uint64
	for i := range sites {
		s, at := &sites[i], l.first[i]
		if at >= len(counters) {
			break
		}
		fn := metrics.Function{Name: countedName(s)}
		if !l.timed[i] {
			fn.Calls = counters[at]
		} else {
			fn.Timed, fn.SumNs = true, counters[at]
			fn.Buckets = append([]uint64(nil), counters[at+1:at+1+ringlayout.HistBuckets]...)
			for _, n := range fn.Buckets {
				fn.Calls += n
			}
			if l.errs[i] {
				fn.CountsErrors, fn.Errors = true, counters[at+1+ringlayout.HistBuckets]
			}
		}
		if fn.Calls == 0 {
			continue
		}
		calls += fn.Calls
		fns = append(fns, fn)
	}
	return metrics.Sum(&metrics.Snapshot{Functions: fns}), calls
}

// sum is counters of one process, as long as the layout says.
func (l leftLayout) sum(counters []uint64) []uint64 { return l.sumInto(nil, counters) }

// sumInto is sum, in dst's array where it has room.
func (l leftLayout) sumInto(dst, counters []uint64) []uint64 {
	dst = slices.Grow(dst[:0], l.n)[:l.n]
	clear(dst[copy(dst, counters):])
	return dst
}
