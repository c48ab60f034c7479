package toolexec

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/elfpatch"
	"github.com/go-usdt/usdt/internal/funcsites"
	"github.com/go-usdt/usdt/internal/importcfg"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
)

// link runs the linker, then writes the notes for every probe table in the
// executable. If that fails the executable is removed: a binary without the
// probes it was built for must not look like a successful build.
func (inv Invocation) link() error {
	// The notes step allocates what it reads and writes, some 25 MB at
	// 27,000 probes, in a process that ends right after: collecting it
	// from the runtime's first small heap goals took a quarter of the
	// step. Under a bound, in case a binary has far more probes.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(256 << 20)
	// Decoding the tables' strings was most of the notes step, and needs
	// no address: it runs while the linker does, from the objects beside
	// the compiled Go in the package archives, where the stubs are. So
	// does reading which rules the packages' compiles used.
	ahead := make(chan archives, 1)
	go func() {
		var a archives
		a.packagefile, _, _ = importcfg.Read(flagValue(inv.Args, "importcfg"))
		paths := slices.Collect(maps.Values(a.packagefile))
		a.tables = probetable.DecodeArchives(paths)
		if inv.Rules != nil {
			a.selected = selectedRules(inv.Rules, paths)
		}
		ahead <- a
	}()
	if err := inv.run(inv.Tool, inv.Args...); err != nil {
		return err
	}
	out := flagValue(inv.Args, "o")
	if out == "" {
		return nil
	}
	a := <-ahead
	sites, err := writeNotes(out, a.tables, func(err error) {
		fmt.Fprintf(inv.Stderr, "usdt-toolexec: warning: %v\n", err)
	})
	if err != nil {
		os.Remove(out)
		return fmt.Errorf("writing USDT notes into %s: %w", out, err)
	}
	if inv.Verbose {
		summarize(sites, inv.Stderr)
	}
	inv.warnUnmatched(a.packagefile, a.selected)
	return nil
}

// archives is what the link step reads of the package archives while the
// linker runs.
type archives struct {
	packagefile map[string]string // import path -> archive
	tables      *probetable.Ahead
	selected    []int // the rules some package selected functions by
}

// writeNotes writes the notes of the probes of the executable at path,
// and gives warn what kept a note-only probe from its function.
func writeNotes(path string, ahead *probetable.Ahead, warn func(error)) ([]probe.Probe, error) {
	return elfpatch.AddNotes(path, func(image []byte) ([]probe.Probe, error) {
		sites, err := probetable.ScanImage(image, ahead)
		// Not an ELF executable (another GOOS): nothing to do.
		if _, ok := err.(*elf.FormatError); ok {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(sites, func(p probe.Probe) bool { return p.Func != "" }) {
			f, err := elf.NewFile(bytes.NewReader(image))
			if err != nil {
				return nil, err
			}
			var errs []error
			sites, errs = funcsites.Place(f, sites)
			for _, err := range errs {
				warn(err)
			}
			shareSemaphores(sites)
		}
		disambiguate(sites)
		return sites, nil
	})
}

// shareSemaphores gives each note on a function as compiled (sites:
// switch, rewrite's plainNotes) the semaphore of its traced copy's
// probe of the same name, which it has none of its own: a consumer
// that takes one semaphore for all the sites of a probe (bpftrace 0.17
// takes the first) then turns on the copy's sites too,
// and one that counts each site's (the kernel's uprobes) counts both.
// The function's code reads no semaphore, and is the same either way.
func shareSemaphores(sites []probe.Probe) {
	type key struct{ pkg, provider, name string }
	sems := map[key]uint64{}
	for _, s := range sites {
		if s.Func == "" && s.Semaphore != 0 {
			sems[key{s.Package, s.Provider, s.Name}] = s.Semaphore
		}
	}
	for i, s := range sites {
		if s.Func != "" && s.Semaphore == 0 {
			sites[i].Semaphore = sems[key{s.Package, s.Provider, s.Name}]
		}
	}
}

// disambiguate renames the automatic probes of packages that share a
// package name with another package of the binary: their <pkg> part becomes
// the whole import path with every other character than [A-Za-z0-9]
// replaced by '_' (encoding/json -> encoding_json). Only the link step sees
// every package, so only it can tell.
//
// A package's sites come one after another, so the names of a package are
// looked up once per run of its sites: at 27,000 sites, splitting every
// name twice took 3 ms of the step.
func disambiguate(sites []probe.Probe) {
	paths := map[string]map[string]bool{} // package name -> import paths
	last := ""
	for _, s := range sites {
		if s.Package == "" || s.Package == last {
			continue
		}
		if _, pkg, _, ok := autoprobe.Split(s.Name); ok {
			last = s.Package
			if paths[pkg] == nil {
				paths[pkg] = map[string]bool{}
			}
			paths[pkg][s.Package] = true
		}
	}
	renamed := map[string]bool{} // import paths
	for _, ps := range paths {
		if len(ps) > 1 {
			for p := range ps {
				renamed[p] = true
			}
		}
	}
	for i, s := range sites {
		if !renamed[s.Package] {
			continue
		}
		if kind, _, fn, ok := autoprobe.Split(s.Name); ok {
			sites[i].Name = autoprobe.Name(kind, s.Package, fn)
		}
	}
}

// summarize prints what the binary carries.
func summarize(sites []probe.Probe, w io.Writer) {
	funcs := map[string]map[string]bool{}
	generated := 0
	for _, s := range sites {
		_, _, fn, ok := autoprobe.Split(s.Name)
		if s.Package == "" || !ok {
			generated++
			continue
		}
		if funcs[s.Package] == nil {
			funcs[s.Package] = map[string]bool{}
		}
		funcs[s.Package][strings.ReplaceAll(fn, "__", ".")] = true
	}
	var pkgs []string
	total := 0
	for p, fs := range funcs {
		pkgs = append(pkgs, p)
		total += len(fs)
	}
	sort.Strings(pkgs)
	// The go command heads this output with the package being linked; the
	// output path is a temporary one.
	fmt.Fprintf(w, "usdt-toolexec: linked %d probes: %d from usdtgen, %d functions instrumented in %d packages\n",
		len(sites), generated, total, len(pkgs))
	for _, p := range pkgs {
		fmt.Fprintf(w, "usdt-toolexec:   %s: %d functions\n", p, len(funcs[p]))
	}
}
