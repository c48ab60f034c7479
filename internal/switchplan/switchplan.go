// Package switchplan pairs the functions of an executable that a rule
// built with sites: switch with their traced copies, and plans each
// switch (textpatch): usdt-toolexec switch, list -switch and trace take
// their switches from it.
package switchplan

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
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
	var pairs []Pair
	for _, name := range names {
		copy, ok := TracedCopy(name)
		if !ok || !have[copy] || !want(name) {
			continue
		}
		pair := Pair{Func: name, Copy: copy}
		if p, err := pl.Plan(name, copy); err != nil {
			pair.Why = strings.TrimPrefix(err.Error(), name+": ")
		} else if n := noteIn(notes, p.Writes); n != nil {
			// A uprobe there (bpftrace's, by that note) would put back
			// the byte the file has when it went, undoing the switch
			// under its tracer: arm64's frameless functions, whose
			// entry is both the note and the instruction a switch
			// replaces.
			pair.Why = fmt.Sprintf("its note %s:%s is on the bytes a switch writes, where a uprobe would undo the switch: its calls fire at the note, with a trap", values.Escape(n.Provider), values.Escape(n.Name))
		} else {
			pair.Patch = &p
		}
		pairs = append(pairs, pair)
	}
	return pairs, nil
}

// noteIn returns a note whose address is in bytes that writes write, or
// nil.
func noteIn(notes []sdtnote.Note, writes []textpatch.Write) *sdtnote.Note {
	for i, n := range notes {
		for _, w := range writes {
			if n.PC >= w.At && n.PC < w.At+uint64(len(w.New)) {
				return &notes[i]
			}
		}
	}
	return nil
}

// Patches returns the planned switches of pairs, and says through warn
// why each function that cannot be switched stays as compiled.
func Patches(pairs []Pair, warn func(format string, args ...any)) []textpatch.Patch {
	var patches []textpatch.Patch
	for _, p := range pairs {
		if p.Patch == nil {
			warn("%s stays as compiled: %v", p.Func, p.Why)
			continue
		}
		patches = append(patches, *p.Patch)
	}
	return patches
}

// Plan plans the switches of the functions of the executable exe that a
// pattern matches and that have a traced copy, and says why each
// function that cannot be switched stays as compiled.
func Plan(exe string, patterns []string, warn func(format string, args ...any)) ([]textpatch.Patch, error) {
	pairs, err := Pairs(exe, patterns)
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("%s: no function that %s matches has a traced copy: build it with a rule that says sites: switch (docs/rules.md)", exe, strings.Join(patterns, " or "))
	}
	return Patches(pairs, warn), nil
}

// List writes, for each function of the executable exe that has a
// traced copy, whether it can be switched to it, and if not why
// (usdt-toolexec list -switch).
func List(exe string, w io.Writer) error {
	pairs, err := Pairs(exe, []string{"*"})
	if err != nil {
		return err
	}
	if len(pairs) == 0 {
		return fmt.Errorf("%s: no function has a traced copy: build it with a rule that says sites: switch (docs/rules.md)", exe)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FUNCTION\tCOPY\tSWITCH")
	for _, p := range pairs {
		status := "yes"
		if p.Patch == nil {
			status = "no: " + p.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", values.Escape(p.Func), values.Escape(p.Copy), values.Escape(status))
	}
	return tw.Flush()
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
// linker gives it (main.(*Cache).Get) or as Go writes it (main.Cache.Get).
func Matches(patterns []string, name string) bool {
	plain := strings.NewReplacer("(*", "", ")", "").Replace(name)
	for _, p := range patterns {
		for _, n := range []string{name, plain} {
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
		if err := holds.Release(patches[i].Entry); err != nil {
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
	for _, p := range patches {
		if err := h.Take(p.Entry); err != nil {
			h.Close()
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
	}
	return h, nil
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
	rep, err := textpatch.Restore(pid, done, textpatch.Options{Keep: func(p *textpatch.Patch) (bool, error) { return ask.Others(p.Entry) }})
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
