// Package inspect reads the probes of a built binary for usdt-toolexec's
// list and bt subcommands.
package inspect

import (
	"debug/elf"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/go-usdt/usdt/internal/sdtnote"
)

// readNotes returns the stapsdt notes of the executable at path.
func readNotes(path string) ([]sdtnote.Note, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return sdtnote.Read(f)
}

// list prints the probes of a binary the way tracers will see them.
func List(path string, w io.Writer) error {
	notes, err := readNotes(path)
	if err != nil {
		return err
	}
	if len(notes) == 0 {
		return fmt.Errorf("%s: no USDT probes", path)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tPROBE\tPC\tSEMAPHORE\tARGS")
	for _, n := range notes {
		fmt.Fprintf(tw, "%s\t%s\t%#x\t%#x\t%s\n", n.Provider, n.Name, n.PC, n.Semaphore, n.Args)
	}
	return tw.Flush()
}
