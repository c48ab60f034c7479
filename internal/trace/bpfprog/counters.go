package bpfprog

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// With -stats a program of its own counts each call in a per-CPU array
// and sends nothing: the site's cookie indexes a table of where its
// counters start and, for an exit probe, where the call's elapsed time
// (arg1) is. An exit probe adds the time to its site's total and one to
// the bucket of its power of two, as bits.Len64 numbers them; any other
// probe adds one to its count. The adds are atomic although the counters
// are the CPU's own: a program preempted between its load and store would
// lose the count of one that ran meanwhile.

const (
	// Stat site table value: where arg1 is as putArg writes it (where
	// 0: the site counts only), with slot u32 at 4, the site's first
	// counter.
	statWhere = 0
	statSlot  = 4
	statSize  = 16

	// HistBuckets are a timed site's buckets, after its total time.
	HistBuckets = 64
	// TimedSlots are the counters of a timed site.
	TimedSlots = 1 + HistBuckets
)

// StatSite is what the counting program knows of a site.
type StatSite struct {
	Addr uint64 // as Site.Addr
	// First is the site's first counter: its count, or for a timed site
	// its total time, then HistBuckets buckets.
	First int
	// Elapsed is where a timed site's call has its elapsed time; nil
	// for a site that only counts.
	Elapsed *Arg
}

// Counters are the counting program's maps, and the program once loaded.
type Counters struct {
	sites, counters *ebpf.Map
	slots           int
	// byIP finds the sites on a kernel without BPF cookies (see
	// siteEntry); nil on one with them.
	byIP *ebpf.Map
	prog *ebpf.Program
	// tasks, when not nil, are the only tasks whose calls count.
	tasks *Tasks
}

// Close closes the maps, the program and the tasks.
func (o *Counters) Close() {
	for _, c := range []interface{ Close() error }{o.prog, o.sites, o.counters, o.byIP} {
		if c != nil {
			c.Close()
		}
	}
	if o.tasks != nil {
		o.tasks.Close()
	}
}

// NewCounters makes the maps for sites and slots counters.
func NewCounters(sites []StatSite, slots int) (*Counters, error) {
	o := Counters{slots: slots}
	var err error
	if o.sites, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_stat_sites", Type: ebpf.Array, KeySize: 4, ValueSize: statSize, MaxEntries: uint32(max(len(sites), 1))}); err != nil {
		o.Close()
		return nil, err
	}
	if o.counters, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_stats", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(max(slots, 1))}); err != nil {
		o.Close()
		return nil, err
	}
	addrs := make([]uint64, len(sites))
	for i, s := range sites {
		addrs[i] = s.Addr
	}
	if o.byIP, err = newSiteIPs(addrs); err != nil {
		o.Close()
		return nil, err
	}
	err = fillArray(o.sites, len(sites), func(i int) []byte {
		b := make([]byte, statSize)
		le.PutUint32(b[statSlot:], uint32(sites[i].First))
		if a := sites[i].Elapsed; a != nil {
			putArg(b, *a)
		}
		return b
	})
	if err != nil {
		o.Close()
		return nil, err
	}
	return &o, nil
}

// Only has the program count only the calls of t's tasks; Close closes t.
func (o *Counters) Only(t *Tasks) { o.tasks = t }

// Load loads the program, for uprobe_multi links or for single uprobes.
func (o *Counters) Load(multi bool) (*ebpf.Program, error) {
	var only int
	if o.tasks != nil {
		only = o.tasks.m.FD()
	}
	var err error
	o.prog, err = reloadProgram(o.prog, "usdt_stats", statProgram(o.sites.FD(), o.byIP, o.counters.FD(), only), multi)
	return o.prog, err
}

// RecursionMisses is how many probe hits the kernel did not count: it
// skips the program while another BPF program runs on the CPU.
func (o *Counters) RecursionMisses() uint64 {
	if o.prog == nil {
		return 0
	}
	st, err := o.prog.Stats()
	if err != nil {
		return 0
	}
	return st.RecursionMisses
}

// statProgram counts a call in counters; only, when not 0, is the map of
// the only tasks that count.
func statProgram(sites int, byIP *ebpf.Map, counters, only int) asm.Instructions {
	const keySlot, valSlot = -8, -16
	const rElapsed, rBucket = asm.R8, asm.R9
	insns := asm.Instructions{asm.Mov.Reg(rCtx, asm.R1)}
	if only != 0 {
		insns = append(insns, filterTasks(only)...)
	}
	insns = append(insns, siteEntry(sites, byIP, keySlot)...)
	insns = append(insns,
		asm.Mov.Reg(rSpec, asm.R0),
		asm.LoadMem(asm.R1, rSpec, statWhere, asm.Byte),
		asm.Mov.Imm(rElapsed, 1),
		asm.Mov.Imm(rBucket, 0),
		asm.JEq.Imm(asm.R1, 0, "count"),
	)
	insns = append(insns, readArg(rSpec, 0, valSlot, rElapsed, "elapsed")...)
	// bits.Len64 of the elapsed time, by halving: the bits above each
	// half, when there are any, move down and count.
	insns = append(insns, asm.Mov.Reg(asm.R2, rElapsed))
	for _, shift := range []int32{32, 16, 8, 4, 2, 1} {
		next := fmt.Sprintf("len%d", shift)
		insns = append(insns,
			asm.Mov.Reg(asm.R3, asm.R2),
			asm.RSh.Imm(asm.R3, shift),
			asm.JEq.Imm(asm.R3, 0, next),
			asm.Mov.Reg(asm.R2, asm.R3),
			asm.Add.Imm(rBucket, shift),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(next),
		)
	}
	insns = append(insns,
		asm.Add.Reg(rBucket, asm.R2),
		// A negative time (there is none: the clock is monotonic) counts
		// in the last bucket rather than past it.
		asm.JLE.Imm(rBucket, HistBuckets-1, "total"),
		asm.Mov.Imm(rBucket, HistBuckets-1),
	)
	insns = append(insns, addCounter("total", counters, 0, rElapsed)...)
	insns = append(insns, asm.Mov.Imm(rElapsed, 1), asm.Add.Imm(rBucket, 1))
	insns = append(insns, addCounter("count", counters, rBucket, rElapsed)...)
	return append(insns,
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
}

// addCounter adds the register n to the counter at the site's slot plus
// the register off (none when 0), atomically. The site's table entry is
// in rSpec; the instructions start at label.
func addCounter(label string, counters int, off, n asm.Register) asm.Instructions {
	insns := asm.Instructions{asm.LoadMem(asm.R1, rSpec, statSlot, asm.Word).WithSymbol(label)}
	if off != 0 {
		insns = append(insns, asm.Add.Reg(asm.R1, off))
	}
	insns = append(insns, lookupKey(counters, asm.R1, -4)...)
	return append(insns, asm.AddAtomic.Mem(asm.R0, n, asm.DWord, 0))
}

// Read returns every counter, its CPUs' counts summed, in batches where
// the kernel has them (5.6+), else one by one.
func (o *Counters) Read() ([]uint64, error) {
	m, n := o.counters, o.slots
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	sums := make([]uint64, n)
	const batch = 4096
	keys := make([]uint32, batch)
	vals := make([]uint64, batch*cpus)
	var cursor ebpf.MapBatchCursor
	for done := 0; done < n; {
		got, err := m.BatchLookup(&cursor, keys, vals, nil)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) && done == 0 {
			return readCountersEach(m, sums)
		}
		for i := range got {
			for _, v := range vals[i*cpus : (i+1)*cpus] {
				sums[keys[i]] += v
			}
		}
		done += got
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return sums, nil
}

func readCountersEach(m *ebpf.Map, sums []uint64) ([]uint64, error) {
	var perCPU []uint64
	for i := range sums {
		if err := m.Lookup(uint32(i), &perCPU); err != nil {
			return nil, err
		}
		for _, v := range perCPU {
			sums[i] += v
		}
	}
	return sums, nil
}
