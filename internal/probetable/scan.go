package probetable

import (
	"bytes"
	"debug/elf"
	"fmt"
	"slices"

	"github.com/go-usdt/usdt/internal/probe"
)

// NamesSection is the non-allocated section where the cgo route's GNU
// assembler files put their tables. Their probes' notes come from the same
// files, so a tracer reads such a table for its argument kinds and names
// only, and the link step, which scans the writable data, leaves it alone.
const NamesSection = ".usdt.names"

// Scan finds every probe table in the writable, file-backed sections of an
// executable. Tables are 8-byte aligned symbols, so only aligned offsets are
// candidates; a candidate that fails to decode is skipped.
func Scan(f *elf.File) ([]probe.Probe, error) {
	tables, err := scanData(f)
	return slices.Concat(tables...), err
}

// scanData returns the tables of f's writable sections, each apart.
func scanData(f *elf.File) ([][]probe.Probe, error) {
	var tables [][]probe.Probe
	for _, s := range f.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_ALLOC == 0 || s.Flags&elf.SHF_WRITE == 0 {
			continue
		}
		found, err := scanSection(s, s.Addr)
		if err != nil {
			return nil, err
		}
		tables = append(tables, found...)
	}
	return tables, nil
}

// scanSection decodes the tables of s, whose offset 0 is at address addr.
// A probe.Probe is large and a binary may hold tens of thousands: the
// tables stay apart until one copy joins them.
func scanSection(s *elf.Section, addr uint64) ([][]probe.Probe, error) {
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.Name, err)
	}
	var tables [][]probe.Probe
	for off := 0; ; {
		i := bytes.Index(data[off:], Magic[:len(Magic)-1])
		if i < 0 {
			return tables, nil
		}
		at := off + i
		if (addr+uint64(at))%8 != 0 {
			off = at + 1
			continue
		}
		found, size, err := Decode(data[at:], addr+uint64(at))
		switch {
		case err == ErrNotTable:
			off = at + 1
			continue
		case err != nil:
			return nil, fmt.Errorf("probe table at %#x in %s: %w", addr+uint64(at), s.Name, err)
		}
		tables = append(tables, found)
		off = at + size
	}
}

// ByPC indexes the probes of f's tables, in its writable data and in
// NamesSection, by PC, the address their notes give: a note's probe
// describes the note's arguments. Notes without a table (those of C
// objects) have no entry. The probes of NamesSection have no Semaphore.
func ByPC(f *elf.File) (map[uint64]probe.Probe, error) {
	tables, err := scanData(f)
	if err != nil {
		return nil, err
	}
	var named [][]probe.Probe
	if s := f.Section(NamesSection); s != nil && s.Type == elf.SHT_PROGBITS {
		// The section has no address: its offsets keep the alignment the
		// assembler gave the tables.
		if named, err = scanSection(s, 0); err != nil {
			return nil, err
		}
	}
	n := 0
	for _, ts := range [][][]probe.Probe{tables, named} {
		for _, t := range ts {
			n += len(t)
		}
	}
	byPC := make(map[uint64]probe.Probe, n)
	for _, t := range tables {
		for _, p := range t {
			byPC[p.PC] = p
		}
	}
	for _, t := range named {
		for _, p := range t {
			p.Semaphore = 0
			byPC[p.PC] = p
		}
	}
	return byPC, nil
}
