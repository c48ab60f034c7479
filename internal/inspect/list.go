// Package inspect reads the probes of a built binary for usdt-toolexec's
// list and bt subcommands.
package inspect

import (
	"debug/elf"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
	"github.com/go-usdt/usdt/internal/sdtnote"
	"github.com/go-usdt/usdt/internal/values"
)

// readProbes returns the stapsdt notes of the executable at path, and the
// probes of its tables by PC, their names, types and specs escaped as
// values.Escape escapes a value's text: list and bt print them, and a
// binary nobody vouches for may hold any bytes there, a terminal's
// escape sequences among them.
func readProbes(path string) ([]sdtnote.Note, map[uint64]probe.Probe, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	notes, err := sdtnote.Read(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, n := range notes {
		notes[i].Provider, notes[i].Name, notes[i].Args = values.Escape(n.Provider), values.Escape(n.Name), values.Escape(n.Args)
	}
	byPC, err := probetable.ByPC(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	for pc, p := range byPC {
		byPC[pc] = p.Escaped(values.Escape)
	}
	return notes, byPC, nil
}

// keptInlined returns the functions of the executable at path that a rule
// selected and that stay as written, unprobed, because the compiler
// inlines them, by their import paths and names.
func keptInlined(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	probes, err := probetable.Scan(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var kept []string
	for _, p := range probes {
		if kind, _, fn, ok := autoprobe.Split(p.Name); ok && kind == autoprobe.KeptInlined && p.Func != "" {
			kept = append(kept, values.Escape(autoprobe.Label(p.Package, fn, p.Receiver)))
		}
	}
	slices.Sort(kept)
	return slices.Compact(kept), nil
}

// List prints the probes of a binary the way tracers will see them, with
// the names and Go types of their arguments where the binary's probe
// tables record them. With inlined, it prints instead the functions the
// rules selected that have no probes because the compiler inlines them
// (inline: keep), one per line; without, it says on stderr how many there
// are, so that stdout stays one line per probe.
func List(path string, inlined bool, stdout, stderr io.Writer) error {
	kept, err := keptInlined(path)
	if err != nil {
		return err
	}
	if inlined {
		for _, fn := range kept {
			fmt.Fprintln(stdout, fn)
		}
		return nil
	}
	notes, byPC, err := readProbes(path)
	if err != nil {
		return err
	}
	if len(notes) == 0 && len(kept) == 0 {
		return fmt.Errorf("%s: no USDT probes", path)
	}
	if len(notes) > 0 {
		if err := listNotes(stdout, notes, byPC); err != nil {
			return err
		}
	}
	if len(kept) > 0 {
		fmt.Fprintf(stderr, "usdt-toolexec list: %d functions the rules select are not probed: the compiler inlines them, and they stay as written (list -inlined names them; inline: probe in their rule probes them)\n", len(kept))
	}
	return nil
}

// listNotes prints a line per note.
func listNotes(w io.Writer, notes []sdtnote.Note, byPC map[uint64]probe.Probe) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tPROBE\tPC\tSEMAPHORE\tARGS\tSPEC")
	for _, n := range notes {
		p, ok := byPC[n.PC]
		if specs := len(sdtnote.SplitArgs(n.Args)); !ok || len(p.Args) != specs {
			p = probe.Probe{Args: make([]probe.Arg, specs)}
		}
		fmt.Fprintf(tw, "%s\t%s\t%#x\t%#x\t%s\t%s\n", n.Provider, n.Name, n.PC, n.Semaphore, p.Params(), n.Args)
	}
	return tw.Flush()
}
