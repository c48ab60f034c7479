package probetable

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"runtime"
	"sync"

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
	tables, err := locateData(f, (*elf.Section).Data)
	if err != nil {
		return nil, err
	}
	return decodeAll(tables)
}

// ScanImage is Scan on the executable image holds, which the link step
// maps: the sections it reads are parts of image, not copies.
func ScanImage(image []byte) ([]probe.Probe, error) {
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, err
	}
	tables, err := locateData(f, func(s *elf.Section) ([]byte, error) {
		if s.Offset > uint64(len(image)) || s.FileSize > uint64(len(image))-s.Offset {
			return nil, fmt.Errorf("section %s is past the end of the file", s.Name)
		}
		return image[s.Offset : s.Offset+s.FileSize], nil
	})
	if err != nil {
		return nil, err
	}
	return decodeAll(tables)
}

// located is a table whose header passed (see header): its bytes, its
// address, its number of probes, where they go among all the tables' and
// where it is, for errors.
type located struct {
	b        []byte
	addr     uint64
	n, start int
	section  string
}

// locateData returns the tables of f's writable sections, whose contents
// data gives.
func locateData(f *elf.File, data func(*elf.Section) ([]byte, error)) ([]located, error) {
	var tables []located
	for _, s := range f.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_ALLOC == 0 || s.Flags&elf.SHF_WRITE == 0 {
			continue
		}
		b, err := data(s)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Name, err)
		}
		tables = append(tables, locate(b, s.Addr, s.Name)...)
	}
	return tables, nil
}

// locate finds the tables in data, the section named section, whose offset
// 0 is at address addr.
func locate(data []byte, addr uint64, section string) []located {
	var tables []located
	for off := 0; ; {
		i := bytes.Index(data[off:], Magic[:len(Magic)-1])
		if i < 0 {
			return tables
		}
		at := off + i
		if (addr+uint64(at))%8 != 0 {
			off = at + 1
			continue
		}
		n, size, err := header(data[at:])
		if err != nil {
			off = at + 1
			continue
		}
		tables = append(tables, located{b: data[at : at+size], addr: addr + uint64(at), n: n, section: section})
		off = at + size
	}
}

// decodeAll decodes tables into one slice, a table per processor at once:
// a binary may hold tens of thousands of probes, and a probe.Probe is
// large. A table whose header passed but whose probes do not decode is
// left out, as Decode would reject it.
func decodeAll(tables []located) ([]probe.Probe, error) {
	total := 0
	next := make(chan int, len(tables))
	for i := range tables {
		tables[i].start = total
		total += tables[i].n
		next <- i
	}
	close(next)
	probes := make([]probe.Probe, total)
	errs := make([]error, len(tables))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(tables)) {
		wg.Go(func() {
			for i := range next {
				t := tables[i]
				errs[i] = decodeInto(probes[t.start:t.start+t.n], t.b, t.addr)
			}
		})
	}
	wg.Wait()
	kept := probes[:0]
	for i, t := range tables {
		switch err := errs[i]; {
		case errors.Is(err, ErrNotTable):
		case err != nil:
			return nil, fmt.Errorf("probe table at %#x in %s: %w", t.addr, t.section, err)
		default:
			kept = append(kept, probes[t.start:t.start+t.n]...)
		}
	}
	return kept, nil
}

// ByPC indexes the probes of f's tables, in its writable data and in
// NamesSection, by PC, the address their notes give: a note's probe
// describes the note's arguments. Notes without a table (those of C
// objects) have no entry. The probes of NamesSection have no Semaphore.
func ByPC(f *elf.File) (map[uint64]probe.Probe, error) {
	probes, err := Scan(f)
	if err != nil {
		return nil, err
	}
	var named []probe.Probe
	if s := f.Section(NamesSection); s != nil && s.Type == elf.SHT_PROGBITS {
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Name, err)
		}
		// The section has no address: its offsets keep the alignment the
		// assembler gave the tables.
		if named, err = decodeAll(locate(data, 0, s.Name)); err != nil {
			return nil, err
		}
	}
	byPC := make(map[uint64]probe.Probe, len(probes)+len(named))
	for _, p := range probes {
		byPC[p.PC] = p
	}
	for _, p := range named {
		p.Semaphore = 0
		byPC[p.PC] = p
	}
	return byPC, nil
}
