package main

import (
	"debug/elf"
	"fmt"
	"io"
	"os"

	"github.com/go-usdt/usdt/internal/elfpatch"
	"github.com/go-usdt/usdt/internal/probetable"
)

// link runs the linker, then writes the notes for every probe table in the
// executable. If that fails the executable is removed: a binary without the
// probes it was built for must not look like a successful build.
func link(opt options, tool string, args []string, stdout, stderr io.Writer) error {
	if err := runTool(tool, args, stdout, stderr); err != nil {
		return err
	}
	out := flagValue(args, "o")
	if out == "" {
		return nil
	}
	n, err := writeNotes(out)
	if err != nil {
		os.Remove(out)
		return fmt.Errorf("writing USDT notes into %s: %w", out, err)
	}
	if opt.verbose && n > 0 {
		fmt.Fprintf(stderr, "usdt-toolexec: %s: %d probes\n", out, n)
	}
	return nil
}

func writeNotes(path string) (int, error) {
	f, err := elf.Open(path)
	if err != nil {
		// Not an ELF executable (another GOOS): nothing to do.
		if _, ok := err.(*elf.FormatError); ok {
			return 0, nil
		}
		return 0, err
	}
	sites, err := probetable.Scan(f)
	f.Close()
	if err != nil || len(sites) == 0 {
		return 0, err
	}
	patch := make([]elfpatch.Site, len(sites))
	for i, s := range sites {
		patch[i] = elfpatch.Site{Provider: s.Provider, Name: s.Name, Args: s.Args, PC: s.Stub, Semaphore: s.Semaphore}
	}
	return len(sites), elfpatch.AddNotes(path, patch)
}
