package probetable

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/go-usdt/usdt/internal/funcsites"
	"github.com/go-usdt/usdt/internal/goarchive"
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
	return decodeAll(tables, nil)
}

// ScanImage is Scan on the executable image holds, which the link step
// maps: the sections it reads are parts of image, not copies. The probes
// of a table that ahead decoded before the link are copied, not decoded
// again; ahead may be nil.
func ScanImage(image []byte, ahead *Ahead) ([]probe.Probe, error) {
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
	return decodeAll(tables, ahead)
}

// Ahead holds the tables of object files, decoded while the linker links
// them: their probes have all but their PC and Semaphore, which only the
// executable gives.
type Ahead struct {
	tables map[uint32][]located // by checksum
}

// DecodeArchives decodes the tables of the package archives at paths, in
// their object files but the compiled Go: the stubs' objects the compile
// step appends (see toolexec's appendToArchive) and those of a package's
// own assembly, where a table may start anywhere. A table the executable
// holds otherwise than its object does (one whose trailing zeros the
// object leaves out, say), or that an archive could not be read for, is
// not found here, and ScanImage decodes it.
func DecodeArchives(paths []string) *Ahead {
	var tables []located
	for _, path := range paths {
		for _, obj := range goarchive.Members(path, func(name string) bool {
			return strings.HasSuffix(name, ".o") && name != "_go_.o"
		}) {
			tables = append(tables, locate(obj, 0, false, "")...)
		}
	}
	decodeEach(tables, func(t *located) error { return decodeText(t.probes, t.b) })
	a := &Ahead{tables: map[uint32][]located{}}
	for _, t := range tables {
		if t.err == nil {
			sum := binary.LittleEndian.Uint32(t.b[16:])
			a.tables[sum] = append(a.tables[sum], t)
		}
	}
	return a
}

// find returns the probes a decoded of the linked table b, or nil.
func (a *Ahead) find(b []byte) []probe.Probe {
	if a == nil {
		return nil
	}
	head, tail := linkInvariant(b)
	for _, t := range a.tables[binary.LittleEndian.Uint32(b[16:])] {
		h, tl := linkInvariant(t.b)
		if bytes.Equal(h, head) && bytes.Equal(tl, tail) {
			return t.probes
		}
	}
	return nil
}

// located is a table whose header passed (see header): its bytes, its
// address, its number of probes, where it is, for errors, and once
// decoded, its probes or why it is no table.
type located struct {
	b       []byte
	addr    uint64
	n       int
	section string
	probes  []probe.Probe
	err     error
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
		tables = append(tables, locate(b, s.Addr, true, s.Name)...)
	}
	return tables, nil
}

// locate finds the tables in data, the section named section, whose offset
// 0 is at address addr; with aligned, only at the 8-byte aligned addresses
// the linker gives them.
func locate(data []byte, addr uint64, aligned bool, section string) []located {
	var tables []located
	for off := 0; ; {
		i := bytes.Index(data[off:], Magic[:len(Magic)-1])
		if i < 0 {
			return tables
		}
		at := off + i
		if aligned && (addr+uint64(at))%8 != 0 {
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

// decodeEach gives every table its part of one slice of all their
// probes, and runs decode on them, a table per processor at once: a
// binary may hold tens of thousands of probes, and a probe.Probe is large.
// It returns the slice.
func decodeEach(tables []located, decode func(*located) error) []probe.Probe {
	total := 0
	for _, t := range tables {
		total += t.n
	}
	all := make([]probe.Probe, total)
	next := make(chan int, len(tables))
	at := 0
	for i := range tables {
		tables[i].probes = all[at : at+tables[i].n]
		at += tables[i].n
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(tables)) {
		wg.Go(func() {
			for i := range next {
				tables[i].err = decode(&tables[i])
			}
		})
	}
	wg.Wait()
	return all
}

// decodeAll decodes tables, or copies the probes ahead has of them, and
// returns all their probes. A table whose header passed but whose probes
// do not decode is left out.
func decodeAll(tables []located, ahead *Ahead) ([]probe.Probe, error) {
	all := decodeEach(tables, func(t *located) error {
		if known := ahead.find(t.b); known != nil {
			copy(t.probes, known)
		} else if err := decodeText(t.probes, t.b); err != nil {
			return err
		}
		return locateProbes(t.probes, t.b, t.addr)
	})
	// The tables' probes lie in order in all: keeping those that decoded
	// moves them down in place.
	kept := all[:0]
	for _, t := range tables {
		switch {
		case t.err == nil:
			kept = append(kept, t.probes...)
		case !errors.Is(t.err, ErrNotTable):
			return nil, fmt.Errorf("probe table at %#x in %s: %w", t.addr, t.section, t.err)
		}
	}
	return kept, nil
}

// ByPC indexes the probes of f's tables, in its writable data and in
// NamesSection, by PC, the address their notes give: a note's probe
// describes the note's arguments. A note-only probe is there at each of
// its sites. Notes without a table (those of C
// objects) have no entry. The probes of NamesSection have no Semaphore.
func ByPC(f *elf.File) (map[uint64]probe.Probe, error) {
	probes, err := Scan(f)
	if err != nil {
		return nil, err
	}
	// The link step said why a probe could not be placed.
	probes, _ = funcsites.Place(f, probes)
	var named []probe.Probe
	if s := f.Section(NamesSection); s != nil && s.Type == elf.SHT_PROGBITS {
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Name, err)
		}
		// The section has no address: its offsets keep the alignment the
		// assembler gave the tables.
		if named, err = decodeAll(locate(data, 0, true, s.Name), nil); err != nil {
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
