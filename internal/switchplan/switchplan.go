// Package switchplan pairs the functions of an executable that a rule
// built with sites: switch with their traced copies, and plans each
// switch (textpatch): usdt-toolexec switch, list -switch and trace take
// their switches from it.
package switchplan

import (
	"bufio"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/sdtnote"
	"github.com/go-usdt/usdt/internal/switchhold"
	"github.com/go-usdt/usdt/internal/textpatch"
	"github.com/go-usdt/usdt/internal/values"
)

// A Pair is a function with a traced copy, and its switch: planned, or
// why it cannot be.
type Pair struct {
	Func, Copy string
	Patch      *textpatch.Patch
	Why        string
}

// Pairs finds the functions of the executable exe that a pattern matches
// and that have a traced copy, and plans their switches.
func Pairs(exe string, patterns []string) ([]Pair, error) {
	return PairsOf(exe, func(name string) bool { return Matches(patterns, name) })
}

// PairsOf finds the functions of the executable exe for which want
// says yes (given the name the linker gives) and that have a traced
// copy, and plans their switches, in the order of their names.
func PairsOf(exe string, want func(name string) bool) ([]Pair, error) {
	f, err := elf.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pl, err := textpatch.NewPlanner(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", exe, err)
	}
	names := pl.Funcs()
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	slices.Sort(names)
	notes, err := sdtnote.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", exe, err)
	}
	slices.SortFunc(notes, func(a, b sdtnote.Note) int { return cmp.Compare(a.PC, b.PC) })
	var pairs []Pair
	var ranks []int
	// rank numbers the functions with a copy in the order of their
	// names, want or not: every tracer of the executable gives a
	// function the same (textpatch.Patch's Index).
	rank := -1
	for _, name := range names {
		copy, ok := TracedCopy(name)
		if !ok || !have[copy] {
			continue
		}
		rank++
		if want(name) {
			pairs = append(pairs, Pair{Func: name, Copy: copy})
			ranks = append(ranks, rank)
		}
	}
	patches, errs := planAll(pl, pairs)
	for i := range pairs {
		pair, p := &pairs[i], patches[i]
		if err := errs[i]; err != nil {
			pair.Why = strings.TrimPrefix(err.Error(), pair.Func+": ")
		} else if n := noteIn(notes, p.Writes); n != nil {
			// A uprobe there (bpftrace's, by that note) would put back
			// the byte the file has when it went, undoing the switch
			// under its tracer: arm64's frameless functions, whose
			// entry is both the note and the instruction a switch
			// replaces.
			pair.Why = fmt.Sprintf("its note %s:%s is on the bytes a switch writes, where a uprobe would undo the switch: its calls fire at the note, with a trap", values.Escape(n.Provider), values.Escape(n.Name))
		} else {
			p.Index = ranks[i]
			pair.Patch = &p
		}
	}
	bridge(pairs, ranks)
	return pairs, nil
}

// bridge sets the Unswitchable of each switch of pairs, whose ranks
// are ranks: the pairs right after it, rank after rank, that cannot be
// switched, for any tracer (the same planner on the same executable).
// A tracer holds its switches a lock a run of ranks (Hold), and the
// kernel walks a file's every lock at each lock and each question:
// switching every function of Caddy held 4,832 runs, split by the 9,270
// functions that cannot be switched, and each restore's question of a
// stop took 1.5 ms; bridged, they are one.
func bridge(pairs []Pair, ranks []int) {
	for i := range pairs {
		p := pairs[i].Patch
		if p == nil {
			continue
		}
		for j := i + 1; j < len(pairs) && pairs[j].Patch == nil && ranks[j] == ranks[i]+(j-i); j++ {
			p.Unswitchable++
		}
	}
}

// planAll plans the switch of each of pairs, on every CPU: the plan
// decodes each function's every instruction, 0.3 s of CPU for the 4,830
// functions of the JSON API server's build (scripts/testdata/jsonapi)
// and some 2 s for Caddy's 36,908, before a trace or a switch can
// write the first.
func planAll(pl *textpatch.Planner, pairs []Pair) ([]textpatch.Patch, []error) {
	patches, errs := make([]textpatch.Patch, len(pairs)), make([]error, len(pairs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pairs)) {
		wg.Go(func() {
			// A chunk at a time: the functions differ in size by
			// orders of magnitude.
			const chunk = 64
			for {
				from := int(next.Add(chunk)) - chunk
				if from >= len(pairs) {
					return
				}
				for i := from; i < min(from+chunk, len(pairs)); i++ {
					patches[i], errs[i] = pl.Plan(pairs[i].Func, pairs[i].Copy)
				}
			}
		})
	}
	wg.Wait()
	return patches, errs
}

// noteIn returns a note of notes, sorted by address, whose address is
// in bytes that writes write, or nil.
func noteIn(notes []sdtnote.Note, writes []textpatch.Write) *sdtnote.Note {
	for _, w := range writes {
		i, _ := slices.BinarySearchFunc(notes, w.At, func(n sdtnote.Note, at uint64) int { return cmp.Compare(n.PC, at) })
		if i < len(notes) && notes[i].PC < w.At+uint64(len(w.New)) {
			return &notes[i]
		}
	}
	return nil
}

// Patches returns the planned switches of pairs.
func Patches(pairs []Pair) []textpatch.Patch {
	var patches []textpatch.Patch
	for _, p := range pairs {
		if p.Patch != nil {
			patches = append(patches, *p.Patch)
		}
	}
	return patches
}

// fewUnswitched is how many functions that cannot be switched
// Unswitched names one a line without each.
const fewUnswitched = 5

// Unswitched says through say why the functions of pairs that cannot be
// switched stay as compiled, and then what follows for them: each on a
// line of its own where each is set or they are few, else a line a
// reason, with how many and the first three (a trace of every function
// of a large program has hundreds: the frameless ones).
func Unswitched(pairs []Pair, each bool, then string, say func(line string)) {
	if then != "" {
		then = ": " + then
	}
	var whys []string
	byWhy := map[string][]string{}
	n := 0
	for _, p := range pairs {
		if p.Patch != nil {
			continue
		}
		n++
		if byWhy[p.Why] == nil {
			whys = append(whys, p.Why)
		}
		byWhy[p.Why] = append(byWhy[p.Why], p.Func)
	}
	if each || n <= fewUnswitched {
		for _, p := range pairs {
			if p.Patch == nil {
				say(fmt.Sprintf("%s stays as compiled: %v%s", p.Func, p.Why, then))
			}
		}
		return
	}
	for _, why := range whys {
		fs := byWhy[why]
		eg := strings.Join(fs[:min(3, len(fs))], ", ")
		if len(fs) > 3 {
			eg += ", ..."
		}
		say(fmt.Sprintf("%d functions stay as compiled (%s): %s%s", len(fs), eg, why, then))
	}
	say("-v names each function that stays as compiled, and usdt-toolexec list -switch BINARY lists them all")
}

// Plan plans the switches of the functions of the executable exe that a
// pattern matches and that have a traced copy, and says why those that
// cannot be switched stay as compiled (see Unswitched).
func Plan(exe string, patterns []string, each bool, say func(line string)) ([]textpatch.Patch, error) {
	pairs, err := Pairs(exe, patterns)
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("%s: no function that %s matches has a traced copy: build it with a rule that says sites: switch (docs/rules.md)", exe, strings.Join(patterns, " or "))
	}
	Unswitched(pairs, each, "", say)
	return Patches(pairs), nil
}

// List writes, for each function of the executable exe that has a
// traced copy, whether it can be switched to it, and if not why
// (usdt-toolexec list -switch).
func List(exe string, w io.Writer) error {
	pairs, err := PairsOf(exe, func(string) bool { return true })
	if err != nil {
		return err
	}
	if len(pairs) == 0 {
		return fmt.Errorf("%s: no function has a traced copy: build it with a rule that says sites: switch (docs/rules.md)", exe)
	}
	// tabwriter writes each cell's padding on its own: Caddy's 46,178
	// lines took 1.4 s of system calls to a terminal.
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FUNCTION\tCOPY\tSWITCH")
	for _, p := range pairs {
		status := "yes"
		if p.Patch == nil {
			status = "no: " + p.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", values.Escape(p.Func), values.Escape(p.Copy), values.Escape(status))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// TracedCopy returns the name of the traced copy of the function the
// linker names name (see rewrite's switch.go): pkg.usdtSwitched_F,
// pkg.T.usdtSwitched_M, pkg.(*T).usdtSwitched_M. Copies, closures and
// generic functions have none.
func TracedCopy(name string) (string, bool) {
	if strings.ContainsAny(name, "[") {
		return "", false
	}
	pkgEnd := strings.LastIndexByte(name, '/') + 1
	parts := strings.Split(name[pkgEnd:], ".")
	if _, isCopy := autoprobe.SwitchOf(parts[len(parts)-1]); isCopy {
		return "", false
	}
	switch len(parts) {
	case 2:
		return name[:pkgEnd] + parts[0] + "." + autoprobe.SwitchName(parts[1]), true
	case 3:
		if strings.HasPrefix(parts[2], "func") || strings.HasPrefix(parts[2], "gowrap") {
			return "", false // a closure
		}
		return name[:pkgEnd] + parts[0] + "." + parts[1] + "." + autoprobe.SwitchName(parts[2]), true
	}
	return "", false
}

// Matches reports whether a pattern matches the function's name, as the
// linker gives it (archive/zip.(*File).Open) or as Go writes it
// (archive/zip.File.Open), with its package's whole path or, as trace's
// patterns name functions, its last element alone (zip.File.Open): "*"
// matches every function, as a pattern's "*" stops at a slash.
func Matches(patterns []string, name string) bool {
	plain := strings.NewReplacer("(*", "", ")", "").Replace(name)
	names := []string{name, plain}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		names = append(names, name[i+1:], plain[strings.LastIndexByte(plain, '/')+1:])
	}
	for _, p := range patterns {
		for _, n := range names {
			if ok, _ := path.Match(p, n); ok {
				return true
			}
		}
	}
	return false
}

// Switched returns the patches that rep, textpatch.Switch's report on
// patches, says are switched, by this tracer or another, lets the
// others go from holds (Hold's), and says through warn what became of
// each of them.
func Switched(rep textpatch.Report, patches []textpatch.Patch, holds *switchhold.Holds, warn func(format string, args ...any)) []textpatch.Patch {
	var done []textpatch.Patch
	for i, r := range rep.Results {
		switch r.Outcome {
		case textpatch.Switched, textpatch.AlreadySwitched:
			done = append(done, patches[i])
			continue
		}
		warn("%s stays as compiled: %v: %s", patches[i].Func, r.Outcome, r.Why)
		if err := holds.Release(patches[i].Index); err != nil {
			warn("%v", err)
		}
	}
	return done
}

// Hold holds the switches of patches for this tracer, in process pid,
// before it writes them (internal/switchhold): the last tracer holding
// a function switches it back.
func Hold(pid int, patches []textpatch.Patch) (*switchhold.Holds, error) {
	h, err := switchhold.Open(pid)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	indexes := make([]int, 0, len(patches))
	for _, p := range patches {
		for k := range 1 + p.Unswitchable {
			indexes = append(indexes, p.Index+k)
		}
	}
	if err := h.Take(indexes...); err != nil {
		h.Close()
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return h, nil
}

// kept says which of ps another tracer than ask's holds: nothing of
// any, with one question, where none holds any of them.
func kept(ask *switchhold.Holds, ps []*textpatch.Patch) ([]bool, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	lo, hi := ps[0].Index, ps[0].Index
	for _, p := range ps {
		lo, hi = min(lo, p.Index), max(hi, p.Index)
	}
	if held, err := ask.OthersIn(lo, hi); err != nil || !held {
		return nil, err
	}
	keep := make([]bool, len(ps))
	for i, p := range ps {
		var err error
		if keep[i], err = ask.Others(p.Index); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// Restore switches back the functions of process pid that done
// switched, but those that another tracer than holds's holder holds
// (holds may be nil: a keeper, which holds none), says through warn
// which stay switched, and returns how many are back; a process that
// has exited has none to switch back. It closes holds.
func Restore(pid int, done []textpatch.Patch, holds *switchhold.Holds, warn func(format string, args ...any)) (int, error) {
	defer holds.Close()
	ask := holds
	if ask == nil {
		var err error
		if ask, err = switchhold.Open(pid); errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return 0, nil
		} else if err != nil {
			return 0, err
		}
		defer ask.Close()
	}
	rep, err := textpatch.Restore(pid, done, textpatch.Options{Keep: func(ps []*textpatch.Patch) ([]bool, error) { return kept(ask, ps) }})
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	back := 0
	for i, r := range rep.Results {
		switch r.Outcome {
		case textpatch.Restored, textpatch.AlreadyRestored:
			back++
		case textpatch.Kept:
			if r.Why != "" {
				warn("%s stays switched: %s", done[i].Func, r.Why)
			}
		default:
			warn("%s stays switched: %v: %s", done[i].Func, r.Outcome, r.Why)
		}
	}
	return back, nil
}
