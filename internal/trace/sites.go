package trace

import (
	"debug/elf"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/funcsites"
	"github.com/go-usdt/usdt/internal/layout"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/sdtnote"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
	"github.com/go-usdt/usdt/internal/values"
)

// site is one probe instruction of the executable, as the tracer attaches
// to it.
type site struct {
	Provider, Name string
	args           []bpfprog.Arg
	// kinds are the arguments' kinds where the binary's probe table
	// records them, else nil: then every argument shows as an integer.
	kinds []probe.Kind
	strs  []bool // which arguments are strings
	// names are what each shown value is called (see argLabel), and
	// dropped, the arguments the probe has no room for.
	names, dropped []string
	pc             uint64 // link-time address, what the probe table records
	// fn is the Go function label of an automatic probe, as Go names it
	// ("main.(*Cache).Get"), and exit whether it is the function's exit
	// probe; fn is empty for usdtgen probes. Patterns also match plain,
	// the label the probe name gives ("main.Cache.Get").
	fn, plain string
	exit      bool
	// table is the site's probe in the binary's probe tables: zero for a
	// probe without one.
	table probe.Probe
	// layouts are the table's layouts of the arguments that have one, and
	// plan the reads of their values; both nil for a site without.
	layouts []*layout.Type
	plan    *values.Plan
	// offset and refCtr are file offsets, what uprobes take; addr is
	// where the site is in a process of an executable that is not
	// position-independent, which is where a kernel without BPF cookies
	// tells the sites apart (see siteEntry).
	offset, refCtr uint64
	addr           uint64
	// sem is the semaphore's link-time address, which the ring
	// transport turns the probe on by; 0 for a probe without one.
	sem uint64
	// providerRing says that s is a usdtgen probe that writes to the
	// ring, its records named by its semaphore (see ringlayout.ProviderMagic).
	providerRing bool
	// nopPair says the site is a nopPair, which atNop5 may attach to at
	// offset+1.
	nopPair bool
}

// ringKey is the address the ring's records of s name, at link time:
// its site's, or a usdtgen probe's semaphore's.
func (s *site) ringKey() uint64 {
	if s.providerRing {
		return s.sem
	}
	return s.addr
}

// label is how an event of the site is shown.
func (s *site) label() string { return label(s.fn, s.Provider, s.Name) }

// matches reports whether a glob pattern selects the site: on
// provider:name, or on the Go function of an automatic probe.
func (s *site) matches(pattern string) bool {
	if ok, _ := path.Match(pattern, s.Provider+":"+s.Name); ok {
		return true
	}
	for _, label := range []string{s.fn, s.plain} {
		if ok, _ := path.Match(pattern, label); ok && label != "" {
			return true
		}
	}
	return false
}

// readSites reads the probes of the executable at file.
func readSites(file string) ([]site, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	arch := funcsites.Arch(f.Machine)
	if arch == "" {
		return nil, fmt.Errorf("%s: %v executables are not supported (amd64 and arm64 are)", file, f.Machine)
	}
	// The tables take the longer to decode: the notes are read meanwhile.
	var byPC map[uint64]probe.Probe
	tablesRead := make(chan error, 1)
	go func() {
		var err error
		byPC, err = probetable.ByPC(f)
		tablesRead <- err
	}()
	notes, err := sdtnote.Read(f)
	if terr := <-tablesRead; err == nil {
		err = terr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	// Like every consumer, undo prelinking: the note records where
	// .stapsdt.base was at link time.
	var base uint64
	if s := f.Section(".stapsdt.base"); s != nil {
		base = s.Addr
	}
	sites := make([]site, 0, len(notes))
	for _, n := range notes {
		adjust := uint64(0)
		if base != 0 && n.Base != 0 {
			adjust = base - n.Base
		}
		// Every name the site shows is escaped once, here, as a value's
		// text is: the binary may hold any bytes in them, and each
		// output (events, -json, -latency, -stats, spans, errors)
		// reads them from the site.
		s := site{Provider: values.Escape(n.Provider), Name: values.Escape(n.Name), pc: n.PC, table: byPC[n.PC].Escaped(values.Escape)}
		if s.args, err = bpfprog.ParseArgs(arch, n.Args); err != nil {
			return nil, fmt.Errorf("%s: probe %s:%s: %w", file, s.Provider, s.Name, err)
		}
		s.strs = make([]bool, len(s.args))
		if s.offset, err = fileOffset(f, n.PC+adjust); err != nil {
			return nil, fmt.Errorf("%s: probe %s:%s: %w", file, s.Provider, s.Name, err)
		}
		s.addr = n.PC + adjust
		if n.Semaphore != 0 {
			s.sem = n.Semaphore + adjust
			if s.refCtr, err = fileOffset(f, n.Semaphore+adjust); err != nil {
				return nil, fmt.Errorf("%s: semaphore of %s:%s: %w", file, s.Provider, s.Name, err)
			}
		}
		if kind, pkg, fn, ok := autoprobe.Split(s.Name); ok && (kind == "entry" || kind == "exit") {
			s.fn, s.exit = autoprobe.Label(pkg, fn, s.table.Receiver), kind == "exit"
			s.plain = autoprobe.Label(pkg, fn, "")
			s.dropConstants()
		}
		sites = append(sites, s)
	}
	if slices.ContainsFunc(sites, func(s site) bool { return s.fn == "" && s.sem != 0 }) {
		recorded := ring.ProviderSemaphores(f)
		for i := range sites {
			sites[i].providerRing = sites[i].fn == "" && recorded[sites[i].sem]
		}
	}
	addrs := make([]uint64, len(sites))
	for i := range sites {
		addrs[i] = sites[i].addr
	}
	for i, is := range nopPairs(f, addrs) {
		sites[i].nopPair = is
	}
	return sites, nil
}

func fileOffset(f *elf.File, addr uint64) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no loaded segment", addr)
}

// dropConstants moves the values that a note on a function's own code
// passes as the constant 0, in the place its traced copy's probe passes
// them (sites: switch: a string, a slice, a struct), to the values the
// site does not pass: its events show them as dropped, not as a zero
// they never held.
func (s *site) dropConstants() {
	if s.table.Func == "" || len(s.table.Args) != len(s.args) {
		return
	}
	var args []bpfprog.Arg
	var decl, dropped []probe.Arg
	for j, a := range s.args {
		if j >= s.firstShown() && a.Const {
			dropped = append(dropped, s.table.Args[j])
			continue
		}
		args, decl = append(args, a), append(decl, s.table.Args[j])
	}
	if len(dropped) == 0 {
		return
	}
	s.args, s.strs = args, make([]bool, len(args))
	s.table.Args, s.table.Dropped = decl, append(dropped, s.table.Dropped...)
}

// selectSites keeps the sites any pattern matches, all of them without
// patterns.
func selectSites(sites []site, patterns []string) ([]site, error) {
	if len(patterns) == 0 {
		return sites, nil
	}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	var out []site
	for _, s := range sites {
		for _, p := range patterns {
			if s.matches(p) {
				out = append(out, s)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no probe matches %s (usdt-toolexec list BINARY shows them)", strings.Join(patterns, " "))
	}
	return out, nil
}

// describe gives the selected sites the argument kinds and names of their
// probe tables. Probes without a table (those of C objects) keep integers,
// and they and those of a table older than names show argN.
func describe(sites []site) {
	for i := range sites {
		s := &sites[i]
		decl := make([]probe.Arg, len(s.args))
		if p := s.table; len(p.Args) == len(s.args) {
			decl = p.Args
			s.kinds = p.Kinds()
			for j, k := range s.kinds {
				s.strs[j] = k == probe.String
			}
			for j, a := range p.Dropped {
				s.dropped = append(s.dropped, s.argLabel(a, len(decl)+j))
			}
		}
		used := map[string]bool{}
		for j := s.firstShown(); j < len(decl); j++ {
			name := s.argLabel(decl[j], j)
			// A blank parameter's argN may be another's declared name.
			for used[name] {
				name += "_"
			}
			used[name] = true
			s.names = append(s.names, name)
		}
	}
}

// argLabel is what the tracer calls a, the argument at note position i of
// s: its declared name; where it has none, rN for the Nth result of a
// function, else argN, as bpftrace calls it.
func (s *site) argLabel(a probe.Arg, i int) string {
	switch {
	case a.Name != "" && a.Name != "_":
		return a.Name
	case s.fn != "" && s.exit:
		return fmt.Sprintf("r%d", i-s.firstShown()+1)
	}
	return fmt.Sprintf("arg%d", i)
}

// firstShown is the note position of the first value an event shows:
// automatic probes pass the goroutine id in arg0, and exit probes the
// elapsed time in arg1.
func (s *site) firstShown() int {
	switch {
	case s.fn == "":
		return 0
	case s.exit:
		return min(2, len(s.args))
	}
	return min(1, len(s.args))
}
