package trace

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
	"github.com/go-usdt/usdt/internal/values"
)

// describeValues gives the sites whose probe tables record layouts the
// reads of their values (see internal/values), only of the words the
// probes hold where held (-values=false), and returns what names the
// binary's types for interfaces, nil when it cannot (an error says why:
// no Go runtime data).
func describeValues(sites []site, binary string, held bool) (*typeNames, error) {
	// A binary without build info is laid out as Go's releases do by
	// default.
	info, _ := buildinfo.ReadFile(binary)
	groups := values.MapGroupsOf(info)
	// The sites of a program share most of their layouts (every method
	// of a type has its receiver's) and many their whole argument lists
	// (a function's entry and exit): each layout is decoded, and each
	// plan made, once. At 14,600 sites this part of trace's start-up took
	// 0.3 s instead of 1.4 s.
	decoded := map[string]*layout.Type{}
	type planned struct {
		layouts []*layout.Type
		plan    *values.Plan
	}
	plans := map[string]planned{}
	for i := range sites {
		s := &sites[i]
		if len(s.table.Args) != len(s.args) {
			continue
		}
		var key strings.Builder
		for _, a := range s.table.Args {
			key.WriteString(a.Layout)
			key.WriteByte(0)
		}
		if p, ok := plans[key.String()]; ok {
			s.layouts, s.plan = p.layouts, p.plan
			continue
		}
		var ls []*layout.Type
		for j, a := range s.table.Args {
			if a.Layout == "" {
				continue
			}
			l, ok := decoded[a.Layout]
			if !ok {
				var err error
				if l, err = layout.Decode(a.Layout); err != nil {
					l = nil // a layout newer than this tracer: the address shows
				}
				decoded[a.Layout] = l
			}
			if l == nil {
				continue
			}
			if ls == nil {
				ls = make([]*layout.Type, len(s.args))
			}
			ls[j] = l
		}
		var p planned
		if ls != nil {
			plan := values.NewPlan
			if held {
				plan = values.HeldPlan
			}
			p = planned{ls, plan(ls, groups)}
		}
		plans[key.String()] = p
		s.layouts, s.plan = p.layouts, p.plan
	}
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	names, err := values.NewTypeNames(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &typeNames{names: names, f: f, binary: binary, loaded: map[int]values.Namer{}}, nil
}

// typeNames names the types of the binary's processes. A
// position-independent executable's type descriptors are, in each
// process, where it loaded the binary: its /proc/PID/maps says, and of
// a process that has exited, nothing (then its interfaces show their
// data's address). So trace looks at the command it starts, and the
// process -p names, as soon as it can.
type typeNames struct {
	names  *values.TypeNames
	f      *elf.File
	binary string
	// mu guards loaded: trace learns of processes on one goroutine and
	// decodes their events on another.
	mu     sync.Mutex
	loaded map[int]values.Namer // by process id; nil where unknown
}

// of is what names the types of the process pid.
func (t *typeNames) of(pid int) values.Namer {
	if t == nil {
		return nil
	}
	if t.f.Type != elf.ET_DYN {
		return t.names.Type
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.loaded[pid]
	if !ok {
		n, _ = t.load(pid)
		t.loaded[pid] = n
	}
	return n
}

// forget drops what names the types of process pid: trace will decode
// no more of its events.
func (t *typeNames) forget(pid int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	delete(t.loaded, pid)
	t.mu.Unlock()
}

// early is of for a process trace has just started or taken, before any
// of its events: the kernel tells the parent an exec succeeded before it
// maps the executable, so while the answer is that it is not mapped yet,
// early asks again, every millisecond for up to 5 s, on a goroutine of
// its own. Its events may be decoded long after the process has exited
// (through BPF, on a loaded machine), when its memory map is gone: the
// answer must be had while it lives.
func (t *typeNames) early(pid int) {
	if t == nil || t.f.Type != elf.ET_DYN {
		return
	}
	n, err := t.load(pid)
	if !errors.Is(err, errNotYetMapped) {
		t.set(pid, n)
		return
	}
	go func() {
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			n, err := t.load(pid)
			if errors.Is(err, errNotYetMapped) {
				continue
			}
			if n != nil {
				t.set(pid, n)
			}
			return
		}
	}()
}

// set keeps n as what names the types of process pid, unless n is nil
// and something is kept already.
func (t *typeNames) set(pid int, n values.Namer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n != nil || t.loaded[pid] == nil {
		t.loaded[pid] = n
	}
}

// load names the types of process pid from where its memory map says it
// loaded the executable; nil when it does not say.
func (t *typeNames) load(pid int) (values.Namer, error) {
	bias, err := loadBias(t.f, t.binary, fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	return t.names.Loaded(bias), nil
}

// errNotYetMapped is loadBias's error for a process that maps something,
// but not the executable yet.
var errNotYetMapped = errors.New("the executable is not mapped yet")

// loadBias returns how far above the addresses it is linked at the
// process whose memory map is the file maps loaded the executable f,
// found at path.
func loadBias(f *elf.File, path, maps string) (uint64, error) {
	bin, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(maps)
	if err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, fmt.Errorf("%s is empty: the process has exited", maps)
	}
	// start-end perms offset dev inode path
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		if st, err := os.Stat(fields[5]); err != nil || !os.SameFile(st, bin) {
			continue
		}
		start, _, _ := strings.Cut(fields[0], "-")
		addr, err1 := strconv.ParseUint(start, 16, 64)
		off, err2 := strconv.ParseUint(fields[2], 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && off >= p.Off && off < p.Off+p.Filesz {
				return addr - (p.Vaddr + off - p.Off), nil
			}
		}
	}
	return 0, fmt.Errorf("%s maps no segment of %s: %w", maps, path, errNotYetMapped)
}

// areaSize is the size of a record's value area.
const areaSize = bpfprog.RecEnd - bpfprog.RecVals

// valueArea is a copy of the value area of record b of site s, nil for a
// site without values. The program sends a record up to its farthest
// read: the copy ends there too, and fullArea adds the zeros after.
func valueArea(s *site, b []byte) []byte {
	at := bpfprog.ValsAt(s.strs)
	if s.plan == nil || len(b) <= at {
		return nil
	}
	return bytes.Clone(b[at:min(len(b), at+areaSize)])
}

// fullArea is area, the value area of a site with values, with the
// zeros after the program's farthest read.
func fullArea(area []byte) []byte {
	if len(area) == areaSize {
		return area
	}
	full := make([]byte, areaSize)
	copy(full, area)
	return full
}

// decodeValue decodes argument i of an event of site s, whose raw value is
// raw, from the event's value area, when the site reads its value.
func (s *site) decodeValue(i int, raw uint64, area []byte, names values.Namer) values.Value {
	if s.plan == nil || s.layouts[i] == nil || area == nil {
		return nil
	}
	v, ok := s.plan.Decode(i, s.layouts[i], raw, area, names)
	if !ok {
		return nil
	}
	return v
}
