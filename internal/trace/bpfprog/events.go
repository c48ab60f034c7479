package bpfprog

import (
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/go-usdt/usdt/asmgen"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/values"
)

// The event program carries every fired probe's arguments to the
// tracer through a ring buffer. One program serves every site. Each
// site's uprobe carries its index as the BPF cookie; the program looks the
// site's argument specs up in an array map under it, reads every argument
// from pt_regs or user memory, and sends a record.
//
// A record without Go values has a size of its tier (a string slot is a
// whole StrMax). One with values is built in a per-CPU scratch map and
// sent with as many bytes as its reads filled: the verifier wants a
// reservation's size constant, and a reservation of the largest record a
// plan can fill (RecEnd, near 6K) would take the ring buffer's room of
// 40 records of a call's usual few hundred bytes.

const (
	maxArgs = probe.MaxArgs
	// StrMax is the bytes read of a string argument, NUL included: the
	// probe's copy, so that a string shows whole up to the 256 bytes the
	// probe passes, as gdb and bpftrace 0.27 show it.
	StrMax = probe.CStringMax + 1

	// Spec table value: exit u8 at 0 (the site is an exit probe's, see
	// Site.Exit), goroutine u8 at 1 (Site.Goroutine), valsAt u16 at 2 (a site with values: where its records'
	// value area begins, ValsAt), strSlots u32 at 4 (the string slots its
	// events need: one of strTiers, 0 without strings), then per argument
	// 16 bytes:
	// where u8 (0 none, 1 register, 2 memory), isString u8, regOff u16,
	// pad u32, disp s64.
	specExit      = 0
	specGoroutine = 1
	specValsAt    = 2
	specStrSlots  = 4
	specArgs      = 8
	specArg       = 16
	// Then the site's value reads (values.Op), 16 bytes each: from u8,
	// arg u8, src u16, dst u16, max u16, elem u16, pad. A site with
	// any has strSlots valTier.
	specOps  = specArgs + specArg*maxArgs
	specOp   = 16
	specSize = specOps + specOp*values.MaxOps
	valTier  = 0xff

	// A record: time u64 (CLOCK_MONOTONIC ns), pid_tgid u64, cookie u32,
	// flags u32 (RecAfterLoss), args [12]u64, start u64 (an exit's start time as the
	// program read it, CLOCK_MONOTONIC ns too; 0 where it is not at hand),
	// then with strings [strSlots][StrMax]byte, the slot of argument i at
	// i.
	RecTime    = 0
	RecPidTgid = 8
	RecCookie  = 16
	RecFlags   = 20
	RecArgs    = 24
	RecStart   = RecArgs + 8*maxArgs
	RecSmall   = RecStart + 8
	RecStrings = RecSmall
	// A record with values has the string slots up to its site's last
	// string argument, then the value area from ValsAt, at most RecVals.
	// It is built in a scratch buffer of RecEnd bytes, with room for an
	// op's largest copy past the area's end: the verifier checks where a
	// copy can end, not where the plan puts it.
	RecVals  = RecStrings + StrMax*maxArgs
	RecEnd   = RecVals + values.AreaSize + values.OpMax
	whereReg = 1
	whereMem = 2
	// whereConst is an argument that is a constant: its disp.
	whereConst = 3
	// RecAfterLoss, in a record's flags, says that events of its
	// goroutine (a site's with Site.Goroutine) were lost just before it.
	RecAfterLoss = 1
	// DefaultRing is the ring buffer's size when the tracer names none.
	DefaultRing = 32 << 20
)

// Site is what the programs know of a probe site.
type Site struct {
	// Addr is where the site is in a process of an executable that is
	// not position-independent, which is how a kernel without BPF
	// cookies tells the sites apart (see siteEntry).
	Addr uint64
	Args []Arg
	// Strs says which arguments are strings, read as C strings.
	Strs []bool
	// Plan is the reads of the arguments' Go values; nil for none.
	Plan *values.Plan
	// Exit says the site is a function's exit probe, which asmgen's since
	// may have called with the call's start time in its frame.
	Exit bool
	// Goroutine says argument 0 is the goroutine's id, as an automatic
	// probe's is: its records say where the goroutine's events were lost
	// (RecAfterLoss).
	Goroutine bool
}

// ValsAt is where the value area of a record of a site with values
// begins, strs saying which of its arguments are strings.
func ValsAt(strs []bool) int {
	slots := 0
	for i, s := range strs {
		if s {
			slots = i + 1
		}
	}
	return RecStrings + StrMax*slots
}

// Events are the event program's maps, and the program once loaded.
type Events struct {
	specs, ring, lost *ebpf.Map
	// losses holds the goroutines (tgid u64, id u64) whose last event was
	// lost, until their next one is sent; marks counts the notes made
	// less those taken out, so that a record looks for its goroutine's
	// only while there may be one: while nothing is lost, an event pays
	// an array lookup, not a hash lookup.
	losses, marks *ebpf.Map
	// scratch is where a record with values is built (see ValsAt).
	scratch *ebpf.Map
	// byIP finds the sites on a kernel without BPF cookies (see
	// siteEntry); nil on one with them.
	byIP *ebpf.Map
	prog *ebpf.Program
	// tasks, when not nil, are the only tasks whose events are sent.
	tasks *Tasks
	// wakeAt is how full the ring buffer gets before a record wakes the
	// reader: a sixteenth, at 200,000 events/s of 900 bytes about 12 ms
	// of events in the default size.
	wakeAt int32
}

// Close closes the maps, the program and the tasks.
func (o *Events) Close() {
	for _, c := range []interface{ Close() error }{o.prog, o.specs, o.ring, o.lost, o.losses, o.marks, o.scratch, o.byIP} {
		if c != nil {
			c.Close()
		}
	}
	if o.tasks != nil {
		o.tasks.Close()
	}
}

// encodeSpec lays a site's argument specs and value reads out as the
// program reads them.
func encodeSpec(s Site) []byte {
	b := make([]byte, specSize)
	if s.Exit {
		b[specExit] = 1
	}
	if s.Goroutine {
		b[specGoroutine] = 1
	}
	for i, a := range s.Args {
		o := specArgs + specArg*i
		putArg(b[o:], a)
		if s.Strs[i] {
			b[o+1] = 1
			b[specStrSlots] = byte(strSlots(i + 1))
		}
	}
	if s.Plan == nil || len(s.Plan.Ops) == 0 {
		return b
	}
	b[specStrSlots] = valTier
	le.PutUint16(b[specValsAt:], uint16(ValsAt(s.Strs)))
	for i, op := range s.Plan.Ops {
		o := b[specOps+specOp*i:]
		o[0], o[1] = byte(op.From), op.Arg
		le.PutUint16(o[2:], op.Src)
		le.PutUint16(o[4:], op.Dst)
		le.PutUint16(o[6:], op.Max)
		le.PutUint16(o[8:], op.Elem)
	}
	return b
}

// NewEvents makes the event program's maps for sites, with a ring buffer
// of ring bytes (a power of two, a multiple of the page size).
func NewEvents(sites []Site, ring int) (*Events, error) {
	o := Events{wakeAt: int32(ring / 16)}
	var err error
	if o.specs, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_specs", Type: ebpf.Array, KeySize: 4, ValueSize: specSize, MaxEntries: uint32(max(len(sites), 1))}); err != nil {
		o.Close()
		return nil, err
	}
	if err := fillArray(o.specs, len(sites), func(i int) []byte { return encodeSpec(sites[i]) }); err != nil {
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
	if o.ring, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_events", Type: ebpf.RingBuf, MaxEntries: uint32(ring)}); err != nil {
		o.Close()
		return nil, err
	}
	if o.lost, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_lost", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err != nil {
		o.Close()
		return nil, err
	}
	// LRU: a goroutine that exits after a loss leaves its mark behind.
	if o.losses, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_losses", Type: ebpf.LRUHash, KeySize: 16, ValueSize: 4, MaxEntries: 1 << 14}); err != nil {
		o.Close()
		return nil, err
	}
	if o.marks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_marks", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err != nil {
		o.Close()
		return nil, err
	}
	if o.scratch, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_scratch", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: RecEnd, MaxEntries: 1}); err != nil {
		o.Close()
		return nil, err
	}
	return &o, nil
}

// Only has the program send only the events of t's tasks; Close closes t.
func (o *Events) Only(t *Tasks) { o.tasks = t }

// Ring is the ring buffer the records come through.
func (o *Events) Ring() *ebpf.Map { return o.ring }

// Lost is how many records the program found no room for.
func (o *Events) Lost() uint64 {
	var perCPU []uint64
	if err := o.lost.Lookup(uint32(0), &perCPU); err != nil {
		return 0
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}

// Load loads the program, for uprobe_multi links or for single uprobes:
// the kernel checks the attach type a program was loaded with.
func (o *Events) Load(multi bool) (*ebpf.Program, error) {
	var err error
	o.prog, err = reloadProgram(o.prog, "usdt_trace", o.program(), multi)
	return o.prog, err
}

// The kernel's flags for bpf_ringbuf_query and bpf_ringbuf_submit.
const (
	bpfRBAvailData   = 0
	bpfRBNoWakeup    = 1
	bpfRBForceWakeup = 2
)

// Registers the program keeps across helper calls.
const (
	rCtx   = asm.R6
	rSpec  = asm.R7
	rEvent = asm.R8
)

func (o *Events) program() asm.Instructions {
	specs, events := o.specs.FD(), o.ring.FD()
	const keySlot, valSlot = -8, -16
	insns := asm.Instructions{asm.Mov.Reg(rCtx, asm.R1)}
	if o.tasks != nil {
		insns = append(insns, filterTasks(o.tasks.m.FD())...)
	}
	insns = append(insns,
		asm.StoreImm(asm.RFP, zeroSlot, 0, asm.Word),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, lossKeySlot, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, lossKeySlot+8, asm.R1, asm.DWord),
	)
	insns = append(insns, siteEntry(specs, o.byIP, keySlot)...)
	insns = append(insns, asm.Mov.Reg(rSpec, asm.R0))
	// The goroutine, whose losses its next record reports.
	insns = append(insns,
		asm.LoadMem(asm.R1, rSpec, specGoroutine, asm.Byte),
		asm.JEq.Imm(asm.R1, 0, "tiers"),
		asm.FnGetCurrentPidTgid.Call(),
		asm.RSh.Imm(asm.R0, 32),
		asm.StoreMem(asm.RFP, lossKeySlot, asm.R0, asm.DWord),
	)
	insns = append(insns, readArg(rSpec, specArgs, valSlot, asm.R1, "goroutine")...)
	insns = append(insns,
		asm.StoreMem(asm.RFP, lossKeySlot+8, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, rSpec, specStrSlots, asm.Word).WithSymbol("tiers"),
	)
	for _, n := range strTiers {
		insns = append(insns, asm.JEq.Imm(asm.R1, int32(n), fmt.Sprintf("strs%d", n)))
	}
	// A copy of the body per tier: the verifier must see a reservation
	// large enough for the strings on every path that writes them, and a
	// reservation for all twelve on every event with a string would fill
	// the ring buffer 25 times sooner than a string in the first argument
	// does.
	insns = append(insns, asm.JEq.Imm(asm.R1, valTier, "vals"))
	insns = append(insns, o.body("small", 0, events)...)
	for _, n := range strTiers {
		insns = append(insns, o.body(fmt.Sprintf("strs%d", n), n, events)...)
	}
	insns = append(insns, o.body("vals", maxArgs, events)...)
	insns = append(insns,
		// The goroutine's next record says this one was lost.
		asm.LoadMem(asm.R1, rSpec, specGoroutine, asm.Byte).WithSymbol("lost"),
		asm.JEq.Imm(asm.R1, 0, "count"),
		asm.StoreImm(asm.RFP, keySlot, 1, asm.Word),
		asm.LoadMapPtr(asm.R1, o.losses.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, lossKeySlot),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, keySlot),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
	)
	insns = append(insns, o.addMarks(1, "count")...)
	insns = append(insns,
		asm.LoadMapPtr(asm.R1, o.lost.FD()).WithSymbol("count"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, zeroSlot),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
	return insns
}

// mapCall calls the map helper fn on m with the key at slot of the
// stack.
func mapCall(m *ebpf.Map, fn asm.BuiltinFunc, slot int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(slot)),
		fn.Call(),
	}
}

// addMarks adds delta to the count of loss notes out, and goes on at
// label.
func (o *Events) addMarks(delta int32, label string) asm.Instructions {
	return append(mapCall(o.marks, asm.FnMapLookupElem, zeroSlot),
		asm.JEq.Imm(asm.R0, 0, label),
		asm.Mov.Imm(asm.R1, delta),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
}

// Registers and stack the value reads keep: where the value area begins,
// and the end of the farthest copy into it; the stack slot of the key of
// a goroutine's losses (tgid u64, goroutine id u64); and of a u32 0, the
// key of the one-element maps.
const (
	rVals       = asm.R9
	endSlot     = -48
	lossKeySlot = -64
	zeroSlot    = -4
)

// valueReads carries out the site's value reads (values.Op) into the
// event's value area, in order: a read from a pointer an earlier one
// brought in finds it there. A read from a nil pointer leaves zeros,
// which the decoder knows by the pointer's value; one that faults
// leaves zeros too, and sets its bit in the area's status word
// (values.StatusSize), which is sent with the area.
func valueReads(name string) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(rVals, rSpec, specValsAt, asm.Half).WithSymbol(name + "_ops"),
		asm.JGT.Imm(rVals, RecVals, "out"),
		asm.Add.Reg(rVals, rEvent),
		asm.StoreImm(rVals, 0, 0, asm.Word),
		asm.Mov.Imm(asm.R0, 0),
	}
	for i := range values.MaxOps {
		op := int16(specOps + specOp*i)
		next := fmt.Sprintf("%s_op%d", name, i)
		insns = append(insns,
			asm.LoadMem(asm.R1, rSpec, op, asm.Byte),
			asm.JEq.Imm(asm.R1, int32(values.FromNone), name+"_done"),
			asm.LoadMem(asm.R4, rSpec, op+6, asm.Half),
			asm.JNE.Imm(asm.R1, int32(values.FromArg), next+"_mem"),
			asm.LoadMem(asm.R3, rSpec, op+1, asm.Byte),
			asm.JGT.Imm(asm.R3, maxArgs-1, next),
			asm.LSh.Imm(asm.R3, 3),
			asm.Add.Reg(asm.R3, rEvent),
			asm.LoadMem(asm.R3, asm.R3, RecArgs, asm.DWord),
			asm.Ja.Label(next+"_read"),
			asm.LoadMem(asm.R2, rSpec, op+2, asm.Half).WithSymbol(next+"_mem"),
			asm.JGT.Imm(asm.R2, values.AreaSize-16, next),
			asm.Add.Reg(asm.R2, rVals),
			asm.LoadMem(asm.R3, asm.R2, 0, asm.DWord),
			asm.JNE.Imm(asm.R1, int32(values.FromSlice), next+"_read"),
			// A slice or a string: as many bytes as it has, up to max.
			asm.LoadMem(asm.R5, asm.R2, 8, asm.DWord),
			asm.LoadMem(asm.R0, rSpec, op+8, asm.Half),
			asm.Mul.Reg(asm.R5, asm.R0),
			asm.JGE.Reg(asm.R5, asm.R4, next+"_read"),
			asm.Mov.Reg(asm.R4, asm.R5),
			asm.JEq.Imm(asm.R3, 0, next).WithSymbol(next+"_read"),
			asm.JEq.Imm(asm.R4, 0, next),
			asm.JGT.Imm(asm.R4, values.OpMax, next),
			asm.LoadMem(asm.R1, rSpec, op+4, asm.Half),
			asm.JGT.Imm(asm.R1, values.AreaSize, next),
			// The record is sent up to the end of its farthest copy.
			asm.Mov.Reg(asm.R5, asm.R1),
			asm.Add.Reg(asm.R5, asm.R4),
			asm.LoadMem(asm.R0, asm.RFP, endSlot, asm.DWord),
			asm.JGE.Reg(asm.R0, asm.R5, next+"_copy"),
			asm.StoreMem(asm.RFP, endSlot, asm.R5, asm.DWord),
			asm.Add.Reg(asm.R1, rVals).WithSymbol(next+"_copy"),
			asm.Mov.Reg(asm.R2, asm.R4),
			asm.FnProbeReadUser.Call(),
			asm.JSGE.Imm(asm.R0, 0, next),
			asm.LoadMem(asm.R1, rVals, 0, asm.Word),
			asm.Or.Imm(asm.R1, int32(uint32(1)<<i)),
			asm.StoreMem(rVals, 0, asm.R1, asm.Word),
			asm.LoadMem(asm.R1, asm.RFP, endSlot, asm.DWord),
			asm.JGE.Imm(asm.R1, values.StatusSize, next),
			asm.Mov.Imm(asm.R1, values.StatusSize),
			asm.StoreMem(asm.RFP, endSlot, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(next),
		)
	}
	return insns
}

// sinceStart stores the record's start time: at an exit site that
// asmgen's since called, which its mark in since's frame says, the start
// time there; elsewhere 0, the ring buffer's memory being the last
// record's. It goes on at label.
func sinceStart(label string) asm.Instructions {
	const frameSlot = -40 // the mark to the start time, 24 bytes
	return asm.Instructions{
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(rEvent, RecStart, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, rSpec, specExit, asm.Byte),
		asm.JEq.Imm(asm.R1, 0, label),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, frameSlot),
		asm.Mov.Imm(asm.R2, asmgen.SinceStartAt+8-asmgen.SinceMarkAt),
		asm.LoadMem(asm.R3, rCtx, int16(ptRegs[runtime.GOARCH][spRegister[runtime.GOARCH]]), asm.DWord),
		asm.Add.Imm(asm.R3, asmgen.SinceMarkAt),
		// A failed read leaves zeros, which are no mark.
		asm.FnProbeReadUser.Call(),
		asm.LoadMem(asm.R1, asm.RFP, frameSlot, asm.DWord),
		asm.LoadImm(asm.R2, asmgen.SinceMark, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R2, label),
		asm.LoadMem(asm.R1, asm.RFP, frameSlot+asmgen.SinceStartAt-asmgen.SinceMarkAt, asm.DWord),
		asm.StoreMem(rEvent, RecStart, asm.R1, asm.DWord),
	}
}

// strTiers are the string slot counts a program body exists for.
var strTiers = []int{1, 2, 3, 4, 6, 8, 12}

// strSlots is the smallest tier that holds n string slots.
func strSlots(n int) int {
	for _, t := range strTiers {
		if t >= n {
			return t
		}
	}
	panic(fmt.Sprintf("%d string slots", n))
}

// body reads the arguments into an event with strs string slots, or for
// "vals" into one with the values the site's plan reads.
func (o *Events) body(name string, strs int, events int) asm.Instructions {
	const keySlot, valSlot = -8, -16
	vals := name == "vals"
	var insns asm.Instructions
	done := name + "_done"
	if vals {
		done = name + "_ops"
		insns = asm.Instructions{
			asm.LoadMapPtr(asm.R1, o.scratch.FD()).WithSymbol(name),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, zeroSlot),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
			asm.Mov.Imm(asm.R1, 0),
			asm.StoreMem(asm.RFP, endSlot, asm.R1, asm.DWord),
		}
	} else {
		insns = asm.Instructions{
			asm.LoadMapPtr(asm.R1, events).WithSymbol(name),
			asm.Mov.Imm(asm.R2, int32(RecStrings+StrMax*strs)),
			asm.Mov.Imm(asm.R3, 0),
			asm.FnRingbufReserve.Call(),
			asm.JEq.Imm(asm.R0, 0, "lost"),
		}
	}
	insns = append(insns,
		asm.Mov.Reg(rEvent, asm.R0),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(rEvent, RecTime, asm.R0, asm.DWord),
		asm.FnGetCurrentPidTgid.Call(),
		asm.StoreMem(rEvent, RecPidTgid, asm.R0, asm.DWord),
		asm.LoadMem(asm.R1, asm.RFP, keySlot, asm.Word),
		asm.StoreMem(rEvent, RecCookie, asm.R1, asm.Word),
	)
	insns = append(insns, sinceStart(name+"_args")...)
	for i := range maxArgs {
		spec := int16(specArgs + specArg*i)
		next := fmt.Sprintf("%s_next%d", name, i)
		first := asm.LoadMem(asm.R1, rSpec, spec, asm.Byte)
		if i == 0 {
			first = first.WithSymbol(name + "_args")
		}
		insns = append(insns,
			first,
			asm.JEq.Imm(asm.R1, 0, done),
		)
		insns = append(insns, readArg(rSpec, spec, valSlot, asm.R1, next+"_store")...)
		insns = append(insns, asm.StoreMem(rEvent, int16(RecArgs+8*i), asm.R1, asm.DWord))
		if i < strs {
			insns = append(insns,
				asm.LoadMem(asm.R2, rSpec, spec+1, asm.Byte),
				asm.JEq.Imm(asm.R2, 0, next),
				asm.JEq.Imm(asm.R1, 0, next),
				asm.Mov.Reg(asm.R3, asm.R1),
				asm.Mov.Reg(asm.R1, rEvent),
				asm.Add.Imm(asm.R1, int32(RecStrings+StrMax*i)),
				asm.Mov.Imm(asm.R2, StrMax),
				asm.FnProbeReadUserStr.Call(),
			)
		}
		insns = append(insns, asm.Mov.Imm(asm.R0, 0).WithSymbol(next))
	}
	if vals {
		insns = append(insns, valueReads(name)...)
	}
	// The record's flags: whether the goroutine's last event was lost.
	wake := name + "_wake"
	insns = append(insns,
		asm.StoreImm(rEvent, RecFlags, 0, asm.Word).WithSymbol(name+"_done"),
		asm.LoadMem(asm.R1, rSpec, specGoroutine, asm.Byte),
		asm.JEq.Imm(asm.R1, 0, wake),
	)
	insns = append(insns, mapCall(o.marks, asm.FnMapLookupElem, zeroSlot)...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, wake),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, wake),
	)
	insns = append(insns, mapCall(o.losses, asm.FnMapLookupElem, lossKeySlot)...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, wake),
		asm.StoreImm(rEvent, RecFlags, RecAfterLoss, asm.Word),
	)
	insns = append(insns, mapCall(o.losses, asm.FnMapDeleteElem, lossKeySlot)...)
	insns = append(insns, o.addMarks(-1, wake)...)
	// A record wakes the reader only once the buffer holds wakeAt bytes:
	// a wake-up per record (the default while the reader keeps up) costs
	// the traced thread more than the rest of the program does. The
	// reader polls meanwhile.
	insns = append(insns,
		asm.LoadMapPtr(asm.R1, events).WithSymbol(wake),
		asm.Mov.Imm(asm.R2, bpfRBAvailData),
		asm.FnRingbufQuery.Call(),
		asm.Mov.Imm(asm.R2, bpfRBNoWakeup),
		asm.JLT.Imm(asm.R0, o.wakeAt, name+"_submit"),
		asm.Mov.Imm(asm.R2, bpfRBForceWakeup),
	)
	if !vals {
		return append(insns,
			asm.Mov.Reg(asm.R1, rEvent).WithSymbol(name+"_submit"),
			asm.FnRingbufSubmit.Call(),
			asm.Ja.Label("out"),
		)
	}
	return append(insns,
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol(name+"_submit"),
		asm.LoadMem(asm.R3, rSpec, specValsAt, asm.Half),
		asm.JGT.Imm(asm.R3, RecVals, "out"),
		asm.LoadMem(asm.R0, asm.RFP, endSlot, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R0),
		asm.JLE.Imm(asm.R3, RecEnd, name+"_send"),
		asm.Mov.Imm(asm.R3, RecEnd),
		asm.LoadMapPtr(asm.R1, events).WithSymbol(name+"_send"),
		asm.Mov.Reg(asm.R2, rEvent),
		asm.FnRingbufOutput.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Ja.Label("lost"),
	)
}
