package probetable

import (
	"bytes"
	"debug/elf"
	"fmt"

	"github.com/go-usdt/usdt/internal/probe"
)

// Scan finds every probe table in the writable, file-backed sections of an
// executable. Tables are 8-byte aligned symbols, so only aligned offsets are
// candidates; a candidate that fails to decode is skipped.
func Scan(f *elf.File) ([]probe.Probe, error) {
	var sites []probe.Probe
	for _, s := range f.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_ALLOC == 0 || s.Flags&elf.SHF_WRITE == 0 {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Name, err)
		}
		for off := 0; ; {
			i := bytes.Index(data[off:], Magic[:])
			if i < 0 {
				break
			}
			at := off + i
			if (s.Addr+uint64(at))%8 != 0 {
				off = at + 1
				continue
			}
			found, size, err := Decode(data[at:], s.Addr+uint64(at))
			switch {
			case err == ErrNotTable:
				off = at + 1
				continue
			case err != nil:
				return nil, fmt.Errorf("probe table at %#x in %s: %w", s.Addr+uint64(at), s.Name, err)
			}
			sites = append(sites, found...)
			off = at + size
		}
	}
	return sites, nil
}

// ByPC indexes the probes of f's tables by PC, the address their notes
// give: a note's probe describes the note's arguments. Notes without a
// table (those of C objects) have no entry.
func ByPC(f *elf.File) (map[uint64]probe.Probe, error) {
	found, err := Scan(f)
	if err != nil {
		return nil, err
	}
	byPC := make(map[uint64]probe.Probe, len(found))
	for _, p := range found {
		byPC[p.PC] = p
	}
	return byPC, nil
}
