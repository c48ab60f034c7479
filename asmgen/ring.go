package asmgen

import (
	"bytes"
	"fmt"

	"github.com/go-usdt/usdt/internal/goidoff"
	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/ringlayout"
	"github.com/go-usdt/usdt/internal/valueop"
)

// Runtime is what the generated code reads of Go's runtime: where g keeps
// the goroutine id and, for the in-process ring (package ring), how to
// reach the P a goroutine runs on. A nil P builds trampolines without the
// ring.
type Runtime struct {
	Goid int64
	P    *goidoff.P
}

// RingArch reports whether trampolines of arch can write to the ring.
func RingArch(arch Arch) bool { return arch == AMD64 || arch == ARM64 }

// WithRing reports whether a package's trampolines write to the ring.
func (rt Runtime) WithRing(arch Arch) bool { return rt.P != nil && RingArch(arch) }

const (
	flagDUPOK  = 2
	flagRODATA = 8
)

// ringDecl declares the ring's buffer: every instrumented package does, and
// the linker keeps one copy (DUPOK), as it keeps one of record. It is BSS,
// and NOPTR so that the collector never scans it: a program never traced
// through it touches none of its pages. With it goes ringlayout.Where, the ring's
// address behind a magic word, for tracers of stripped binaries.
func ringDecl(b *bytes.Buffer) {
	fmt.Fprintf(b, "\nGLOBL %s(SB), %d, $%d\n", ringSym(), flagDUPOK|flagNOPTR, ringlayout.Size)
	where := constName(ringlayout.Where)
	fmt.Fprintf(b, "DATA %[1]s+0(SB)/8, $%#[2]x\nDATA %[1]s+8(SB)/8, $%[3]s(SB)\nGLOBL %[1]s(SB), %[4]d, $16\n", where, uint64(ringlayout.WhereMagic), ringSym(), flagDUPOK|flagNOPTR|flagRODATA)
}

func ringSym() string { return constName(ringlayout.Symbol) }

// recordSym is the writer's symbol: one for the program, which every
// instrumented package's assembly defines (DUPOK) the same.
func recordSym() string { return constName(ringlayout.Writer) }

func constName(symbol string) string {
	name, err := asmName(symbol)
	if err != nil {
		panic(err) // a constant
	}
	return name
}

// siteTo is the code that puts the address of the site numbered by AX
// into reg, for record.
func siteTo(sites, reg string) string {
	return fmt.Sprintf("\tLEAQ %[1]s(SB), %[2]s\n\tLEAQ (%[2]s)(AX*8), %[2]s\n", sites, reg)
}

// toRecord is a trampoline's test of the ring, before it goes to the
// site: while a ring tracer records, it calls record with the count of its
// words in R12's low byte and which of them are C strings above (a bit
// each), the site's address in R13, and DX zero (record reads the clock).
func toRecord(b *bytes.Buffer, arch Arch, record, sites string, words int, strs uint64) {
	if arch == ARM64 {
		toRecordARM64(b, record, sites, words, strs)
		return
	}
	fmt.Fprintf(b, "\tCMPQ %s(SB), $%d\n\tJNE fire\n\tMOVQ $%d, R12\n%s\tXORL DX, DX\n\tCALL %s<ABIInternal>(SB)\nfire:\n", ringSym(), ringlayout.Recording, uint64(words)|strs<<8, siteTo(sites, "R13"), record)
}

// ticksTo reads the time-stamp counter into reg (DX or AX), tagged
// with ringlayout.TicksTag. RDTSC, unfenced: a few cycles of reordering do not
// show in a call's time, and the fence would double its cost.
func ticksTo(reg string) string {
	other := map[string]string{"DX": "AX", "AX": "DX"}[reg]
	return fmt.Sprintf("\tRDTSC\n\tSHLQ $32, DX\n\tORQ %[2]s, %[1]s\n\tBTSQ $63, %[1]s\n", reg, other)
}

// ringWrite writes the word in R10 at the head (DI) of the buffer at R9,
// masked by R8: a record may wrap around the buffer's end.
const ringWrite = "\tMOVQ DI, R11\n\tANDQ R8, R11\n\tMOVQ R10, (R9)(R11*1)\n\tADDQ $8, DI\n"

// recordFrame is where record keeps the registers it is called with: the
// site index and the argument registers, then the time, the count of
// words, the strings' bits and the site's address.
// Then, for value reads, the P's id, the site's reads and the bytes of
// its value area, the buffer's head while they run, the count of reads
// gathered in the P's batch and the first not yet read, and the
// registers process_vm_readv and its arguments take. Then the time the
// caller gave, if any. Last, for a wait for room, its end and the
// P's header and the record's size, which the clock's call does not
// keep.
const (
	recordTime    = 8 * 9
	recordWords   = recordTime + 8
	recordStrings = recordWords + 8
	recordSite    = recordStrings + 8
	recordP       = recordSite + 8
	recordPlan    = recordP + 8
	recordArea    = recordPlan + 8
	recordHead    = recordArea + 8
	recordBatch   = recordHead + 8
	recordBatchAt = recordBatch + 8
	recordSaved   = recordBatch + 32
	recordGiven   = recordSaved + 24
	recordUntil   = recordGiven + 8
	recordHeader  = recordUntil + 8
	recordSize    = recordHeader + 8
	recordFrame   = recordSize + 8
)

// wordTo loads word i (in idx) of the trampoline's arguments into dst:
// from record's frame for the eight in registers, else from the caller's
// stack, past record's return address and the trampoline's.
func wordTo(b *bytes.Buffer, idx, dst, label string) {
	fmt.Fprintf(b, "\tCMPQ %[1]s, $8\n\tJCC %[3]sstack\n\tMOVQ 8(SP)(%[1]s*8), %[2]s\n\tJMP %[3]shave\n%[3]sstack:\n\tLEAQ caller+8(FP), %[2]s\n\tMOVQ -64(%[2]s)(%[1]s*8), %[2]s\n%[3]shave:\n", idx, dst, label)
}

// strlenTo counts into DX the bytes of the C string at SI, at most
// probe.CStringMax, which is where its buffer ends with a NUL anyway.
func strlenTo(b *bytes.Buffer, label string) {
	fmt.Fprintf(b, "\tXORL DX, DX\n%[1]s:\n\tCMPB (SI)(DX*1), $0\n\tJEQ %[1]send\n\tINCQ DX\n\tCMPQ DX, $%[2]d\n\tJCS %[1]s\n%[1]send:\n", label, probe.CStringMax)
}

// recordFunc writes the code that writes an event into the P's buffer of
// the ring. It is called, not jumped to, with the trampoline's registers
// (the words in the argument registers and, past eight, on the caller's
// stack), the count of words in R12's low byte and which are pointers to
// C strings above it, the site's address in R13 and the time in DX, or 0
// to read the clock. It returns the registers it was called with, R12 and
// R13 aside, DX holding the event's time. One copy serves the program:
// every package defines it the same, DUPOK.
//
// A string is copied when the probe fires: the fire function's buffer is
// gone by the time the tracer reads. It follows the words, its length in
// a word of its own, then its bytes in whole words.
//
// No atomic operation is needed to write: assembly is never preempted,
// so the goroutine keeps its P, and only the P's goroutine writes its
// buffer. The head is stored after the record, and amd64 keeps stores in
// order, so a tracer that reads the head reads whole records below it.
//
// When the tracer's lease has run out, the tracer is gone (killed, or
// stopped for longer than the lease): the first writer to see it (the
// compare-and-swap decides) takes down the probes the tracer listed
// (cleanList) and sets the ring off, so the program returns to its
// untraced speed.
func recordFunc(b *bytes.Buffer, arch Arch, rt Runtime) {
	if arch == ARM64 {
		recordFuncARM64(b, rt)
		return
	}
	ctl := ringSym()
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $%d\n", recordSym(), flagDUPOK|flagNOSPLIT, recordFrame)
	regs := append([]string{"AX"}, abis[AMD64].args...)
	for i, r := range regs {
		fmt.Fprintf(b, "\tMOVQ %s, %d(SP)\n", r, 8*i)
	}
	fmt.Fprintf(b, "\tMOVQ R13, %d(SP)\n\tMOVQ R12, AX\n\tANDQ $0xff, AX\n\tMOVQ AX, %d(SP)\n\tSHRQ $8, R12\n\tMOVQ R12, %d(SP)\n", recordSite, recordWords, recordStrings)
	// The time in DX, of the tracer's clock: a time of the other clock
	// (a call that began before the tracer changed it) is read again.
	fmt.Fprintf(b, "\tMOVQ DX, %d(SP)\n\tCMPQ %s+%d(SB), $%d\n\tJEQ tsc\n", recordGiven, ctl, ringlayout.ClockAt, ringlayout.Ticks)
	b.WriteString("\tTESTQ DX, DX\n\tJGT timed\n\tCALL runtime·nanotime<ABIInternal>(SB)\n\tMOVQ AX, DX\n\tJMP timed\n")
	b.WriteString("tsc:\n\tTESTQ DX, DX\n\tJMI timed\n" + ticksTo("DX") + "timed:\n")
	fmt.Fprintf(b, "\tMOVQ DX, %d(SP)\n", recordTime)
	fmt.Fprintf(b, "\tCMPQ DX, %s+%d(SB)\n\tJGT expire\n", ctl, ringlayout.UntilAt)
	pTo(b, rt, "done", "noslot")
	fmt.Fprintf(b, "\tMOVQ R13, %d(SP)\n", recordP)
	fmt.Fprintf(b, "\tCMPQ %s+%d(SB), $%d\n\tJEQ count\n", ctl, ringlayout.ModeAt, ringlayout.Counts)
	fmt.Fprintf(b, "\tCMPQ %s+%d(SB), $0\n\tJNE sample\nsampled:\n", ctl, ringlayout.SamplingAt)
	// The record's size in CX: its words, then each string's length and
	// bytes.
	fmt.Fprintf(b, "\tMOVQ %d(SP), CX\n\tLEAQ %d(CX), CX\n\tSHLQ $3, CX\n", recordWords, ringlayout.RecordWords)
	fmt.Fprintf(b, "\tMOVQ %d(SP), R12\n\tTESTQ R12, R12\n\tJEQ sized\n\tXORL R11, R11\nsize:\n\tBTQ R11, R12\n\tJCC sizenext\n", recordStrings)
	wordTo(b, "R11", "SI", "size")
	strlenTo(b, "sizelen")
	fmt.Fprintf(b, "\tADDQ $15, DX\n\tANDQ $~7, DX\n\tADDQ DX, CX\nsizenext:\n\tINCQ R11\n\tCMPQ R11, %d(SP)\n\tJCS size\nsized:\n", recordWords)
	// The value area's bytes, with the site's reads.
	fmt.Fprintf(b, "\tMOVQ $0, %d(SP)\n\tCMPQ %s+%d(SB), $0\n\tJEQ planned\n", recordArea, ctl, ringlayout.PlansAt)
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n", recordSite)
	siteEntry(b, countRegs{site: "R10", table: "R9", hash: "R11", idx: "AX", entry: "SI"}, "plan", "planned")
	fmt.Fprintf(b, "\tMOVQ SI, AX\n\tSHRQ $32, AX\n\tANDQ $%d, AX\n\tADDQ AX, CX\n\tMOVQ AX, %d(SP)\n\tMOVLQZX SI, SI\n\tLEAQ %s(SB), AX\n\tADDQ AX, SI\n\tMOVQ SI, %d(SP)\nplanned:\n", ringlayout.PlanAreaMask, recordArea, ctl, recordPlan)
	// The P's header in BX; room for the record below the tracer's tail?
	fmt.Fprintf(b, "\tMOVQ R13, BX\n\tSHLQ $%d, BX\n\tLEAQ %s+%d(SB), AX\n\tADDQ AX, BX\n", log2(ringlayout.HeaderSize), ctl, ringlayout.HeadersAt)
	fmt.Fprintf(b, "\tMOVQ %d(BX), DI\n\tMOVQ DI, SI\n\tSUBQ %d(BX), SI\n\tADDQ CX, SI\n", ringlayout.HeadAt, ringlayout.TailAt)
	fmt.Fprintf(b, "\tMOVQ %s+%d(SB), R8\n\tCMPQ SI, R8\n\tJHI full\nroomy:\n", ctl, ringlayout.SizeAt)
	// The buffer in R9, the mask in R8.
	fmt.Fprintf(b, "\tIMULQ R8, R13\n\tLEAQ %s+%d(SB), R9\n\tADDQ R13, R9\n\tDECQ R8\n", ctl, ringlayout.BuffersAt)
	// The site's address, the count of words and which are strings; the
	// goroutine; the time; the thread (g.m.procid).
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n", recordSite)
	fmt.Fprintf(b, "\tMOVQ %d(SP), AX\n\tSHLQ $%d, AX\n\tORQ AX, R10\n\tMOVQ %d(SP), AX\n\tSHLQ $%d, AX\n\tORQ AX, R10\n", recordWords, ringlayout.CountShift, recordStrings, ringlayout.StringsShift)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ %d(R14), R10\n", rt.Goid)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n", recordTime)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ %d(R14), R10\n\tMOVQ %d(R10), R10\n", rt.P.GM, rt.P.Procid)
	// The first record after a drop says so: the tracer cannot tell
	// whose events went.
	fmt.Fprintf(b, "\tMOVQ %d(BX), AX\n\tCMPQ AX, %d(BX)\n\tJEQ unbroken\n\tMOVQ AX, %[2]d(BX)\n\tBTSQ $%d, R10\nunbroken:\n", ringlayout.LostAt, ringlayout.LostSeenAt, ringlayout.AfterLossBit)
	fmt.Fprintf(b, "\tMOVQ %d(SP), AX\n\tCMPQ AX, %d(SP)\n\tJNE owntime\n\tBTSQ $%d, R10\nowntime:\n", recordGiven, recordTime, ringlayout.CallerTimeBit)
	b.WriteString(ringWrite)
	// The words, from the registers the frame keeps, then from the
	// caller's stack.
	fmt.Fprintf(b, "\tMOVQ %d(SP), R12\n", recordWords)
	for i := 1; i < len(regs); i++ {
		fmt.Fprintf(b, "\tTESTQ R12, R12\n\tJEQ words\n\tMOVQ %d(SP), R10\n", 8*i)
		b.WriteString(ringWrite)
		b.WriteString("\tDECQ R12\n")
	}
	b.WriteString("\tTESTQ R12, R12\n\tJEQ words\n\tLEAQ caller+8(FP), R13\nstack:\n\tMOVQ (R13), R10\n")
	b.WriteString(ringWrite)
	b.WriteString("\tADDQ $8, R13\n\tDECQ R12\n\tJNE stack\nwords:\n")
	// The strings.
	fmt.Fprintf(b, "\tMOVQ %d(SP), R12\n\tTESTQ R12, R12\n\tJEQ values\n\tXORL CX, CX\nstrings:\n\tBTQ CX, R12\n\tJCC strnext\n", recordStrings)
	wordTo(b, "CX", "SI", "str")
	strlenTo(b, "strlen")
	b.WriteString("\tMOVQ DX, R10\n")
	b.WriteString(ringWrite)
	b.WriteString("\tADDQ $7, DX\n\tSHRQ $3, DX\n\tJEQ strnext\nstrcopy:\n\tMOVQ (SI), R10\n")
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tADDQ $8, SI\n\tDECQ DX\n\tJNE strcopy\nstrnext:\n\tINCQ CX\n\tCMPQ CX, %d(SP)\n\tJCS strings\n", recordWords)
	valueReads(b)
	fmt.Fprintf(b, "publish:\n\tMOVQ DI, %d(BX)\n\tJMP done\n", ringlayout.HeadAt)
	waitForRoom(b)
	fmt.Fprintf(b, "lost:\n\tINCQ %d(BX)\n\tJMP done\n", ringlayout.LostAt)
	countCalls(b)
	sampleCalls(b, rt)
	fmt.Fprintf(b, "noslot:\n\tLOCK\n\tINCQ %s+%d(SB)\n\tJMP done\n", ctl, ringlayout.NoSlotAt)
	fmt.Fprintf(b, "expire:\n\tMOVQ $%d, AX\n\tMOVQ $%d, R13\n\tLOCK\n\tCMPXCHGQ R13, %s+%d(SB)\n\tJNE done\n", ringlayout.Recording, ringlayout.Expiring, ctl, ringlayout.OnAt)
	fmt.Fprintf(b, "\tMOVQ %s+%d(SB), R12\n\tLEAQ %[1]s+%[3]d(SB), R13\n\tTESTQ R12, R12\n\tJEQ off\n", ctl, ringlayout.ListLenAt, ringlayout.ListAt)
	cleanList(b)
	fmt.Fprintf(b, "off:\n\tMOVQ $0, %s+%d(SB)\n", ctl, ringlayout.OnAt)
	b.WriteString("done:\n")
	for i, r := range regs {
		fmt.Fprintf(b, "\tMOVQ %d(SP), %s\n", 8*i, r)
	}
	fmt.Fprintf(b, "\tMOVQ %d(SP), DX\n\tRET\n", recordTime)
	bucketFunc(b)
}

// sysSchedYieldAMD64 is sched_yield's number on linux/amd64.
const sysSchedYieldAMD64 = 24

// waitForRoom writes record's wait at full, with the P's header in BX,
// the record's size in CX, the head in DI: with a bound in BlockAt
// (-block), it yields the thread until the tracer's tail leaves room,
// then goes on at roomy with R8 and R13 as it left them; it goes to
// lost when the bound has passed since its first look at the clock,
// when the ring is no longer on, or at once when this P's last wait ran
// out at the tail the tracer is still at (GaveUpAt), where the P then
// stays until the tracer reads; to expire when the tracer's lease has
// run out. Assembly is not preempted: the goroutine keeps its
// P while it waits.
func waitForRoom(b *bytes.Buffer) {
	ctl := ringSym()
	fmt.Fprintf(b, "full:\n\tMOVQ %s+%d(SB), R10\n\tTESTQ R10, R10\n\tJEQ lost\n", ctl, ringlayout.BlockAt)
	fmt.Fprintf(b, "\tMOVQ %d(BX), AX\n\tINCQ AX\n\tCMPQ AX, %d(BX)\n\tJEQ lost\n", ringlayout.TailAt, ringlayout.GaveUpAt)
	fmt.Fprintf(b, "\tMOVQ $0, %d(SP)\n\tMOVQ BX, %d(SP)\n\tMOVQ CX, %d(SP)\n", recordUntil, recordHeader, recordSize)
	// A system call keeps every register but AX, CX and R11; the
	// clock's call keeps none.
	fmt.Fprintf(b, "wait:\n\tMOVQ $%d, AX\n\tSYSCALL\n\tMOVQ %d(SP), BX\n\tMOVQ %d(SP), CX\n\tMOVQ %d(BX), DI\n\tMOVQ %d(SP), R13\n", sysSchedYieldAMD64, recordHeader, recordSize, ringlayout.HeadAt, recordP)
	fmt.Fprintf(b, "\tCMPQ %s+%d(SB), $%d\n\tJNE lost\n", ctl, ringlayout.OnAt, ringlayout.Recording)
	fmt.Fprintf(b, "\tMOVQ DI, SI\n\tSUBQ %d(BX), SI\n\tADDQ CX, SI\n\tMOVQ %s+%d(SB), R8\n\tCMPQ SI, R8\n\tJLS roomy\n", ringlayout.TailAt, ctl, ringlayout.SizeAt)
	// The time, of the clock the event's was: the ticks, tagged, or
	// runtime.nanotime. A clock changed meanwhile (another tracer's)
	// ends the wait.
	fmt.Fprintf(b, "\tCMPQ %s+%d(SB), $%d\n\tJEQ waittsc\n\tCALL runtime·nanotime<ABIInternal>(SB)\n\tJMP waited\n", ctl, ringlayout.ClockAt, ringlayout.Ticks)
	b.WriteString("waittsc:\n" + ticksTo("AX") + "waited:\n")
	// A tracer that stopped renewing its lease is gone: the waiter
	// takes its probes down, as any writer past the lease does, rather
	// than wait on for it (every other P may be waiting too).
	fmt.Fprintf(b, "\tCMPQ AX, %s+%d(SB)\n\tJGT expire\n", ctl, ringlayout.UntilAt)
	// The first time read sets the bound: the event's own may be a
	// caller's, older.
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n\tTESTQ R10, R10\n\tJNE waitcmp\n\tMOVQ %s+%d(SB), R10\n\tADDQ AX, R10\n\tMOVQ R10, %[1]d(SP)\n\tJMP wait\n", recordUntil, ctl, ringlayout.BlockAt)
	b.WriteString("waitcmp:\n\tMOVQ AX, R11\n\tXORQ R10, R11\n\tBTQ $63, R11\n\tJCS gaveup\n\tCMPQ AX, R10\n\tJCS wait\n")
	fmt.Fprintf(b, "gaveup:\n\tMOVQ %d(SP), BX\n\tMOVQ %d(BX), AX\n\tINCQ AX\n\tMOVQ AX, %d(BX)\n", recordHeader, ringlayout.TailAt, ringlayout.GaveUpAt)
}

// cleanList takes down the probes of the tracer's list, R12 entries
// from R13 (see ringlayout.ListNarrow): an automatic probe's flag, the high
// half of its slot, is stored 0, as the tracer's Stop may store it too;
// a 16-bit semaphore is taken down by one only when the writer moves
// its entry from raised to not, unclaimed, by a compare-and-swap that a
// tracer's claim fails.
func cleanList(b *bytes.Buffer) {
	b.WriteString("clean:\n\tMOVQ (R13), R10\n")
	fmt.Fprintf(b, "\tBTQ $%d, R10\n\tJCS narrow\n\tMOVW $0, 2(R10)\n\tJMP cleannext\n", log2(ringlayout.ListNarrow))
	fmt.Fprintf(b, "narrow:\n\tMOVQ R10, R11\n\tSHRQ $48, R11\n\tCMPQ R11, $%d\n\tJNE cleannext\n", (ringlayout.ListNarrow|ringlayout.ListRaised)>>48)
	fmt.Fprintf(b, "\tMOVQ R10, AX\n\tMOVQ R10, R11\n\tBTRQ $%d, R11\n\tLOCK\n\tCMPXCHGQ R11, (R13)\n\tJNE cleannext\n", log2(ringlayout.ListRaised))
	b.WriteString("\tSHLQ $16, R10\n\tSHRQ $16, R10\n\tLOCK\n\tDECW (R10)\n")
	b.WriteString("cleannext:\n\tADDQ $8, R13\n\tDECQ R12\n\tJNE clean\n")
}

// SinceSymbol is the function the fire functions call for the ns
// elapsed since a call's start (Go: func(start int64) uint64), which
// every package whose trampolines write to the ring defines (DUPOK).
var SinceSymbol = ringlayout.Since

// sinceFunc writes SinceSymbol: runtime.nanotime less the start, or, for
// a start in ticks (ringlayout.TicksTag: read by an entry's trampoline for a
// ring trace that counts by the time-stamp counter), the ticks since, in
// ns by the ring's TickNsAt. A fire function that times a call itself
// (its exit copies a string) would otherwise subtract ticks from ns.
func sinceFunc(b *bytes.Buffer, arch Arch) {
	clockFunc(b, arch, ringlayout.Since, 16,
		"\tTESTQ AX, AX\n\tJMI ticks\n\tMOVQ AX, 0(SP)\n\tCALL runtime·nanotime<ABIInternal>(SB)\n\tSUBQ 0(SP), AX\n\tRET\n"+
			"ticks:\n\tMOVQ AX, CX\n"+ticksTo("AX")+ticksToNs("CX", "ahead")+"\tRET\n",
		"\tMOVD R0, 8(RSP)\n\tBL runtime·nanotime<ABIInternal>(SB)\n\tMOVD 8(RSP), R1\n\tSUB R1, R0, R0\n\tRET\n")
}

// NowSymbol is the function the fire functions call for a call's start
// (Go: func() int64), defined where SinceSymbol is.
var NowSymbol = ringlayout.Now

// nowFunc writes NowSymbol: the ticks, tagged, while the ring's clock is
// the time-stamp counter, for SinceSymbol to count from; else
// runtime.nanotime, whose result is the caller's (a tail call). arm64's
// ring never counts in ticks.
func nowFunc(b *bytes.Buffer, arch Arch) {
	clockFunc(b, arch, ringlayout.Now, 0,
		fmt.Sprintf("\tCMPQ %s+%d(SB), $%d\n\tJNE nanotime\n%s\tRET\nnanotime:\n\tJMP runtime·nanotime<ABIInternal>(SB)\n", ringSym(), ringlayout.ClockAt, ringlayout.Ticks, ticksTo("AX")),
		"\tB runtime·nanotime<ABIInternal>(SB)\n")
}

// clockFunc writes one of the ring's clock functions for the fire
// functions, DUPOK as the writer is, with its body for arch.
func clockFunc(b *bytes.Buffer, arch Arch, symbol string, frame int, amd64, arm64 string) {
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $%d\n", constName(symbol), flagDUPOK|flagNOSPLIT, frame)
	if arch == ARM64 {
		b.WriteString(arm64)
	} else {
		b.WriteString(amd64)
	}
}

// pTo puts the id of the goroutine's P in R13, or goes to noP while
// the thread has none, or to noSlot when the P has no buffer.
func pTo(b *bytes.Buffer, rt Runtime, noP, noSlot string) {
	fmt.Fprintf(b, "\tMOVQ %d(R14), R13\n\tMOVQ %d(R13), R13\n\tTESTQ R13, R13\n\tJEQ %s\n\tMOVLQZX %d(R13), R13\n", rt.P.GM, rt.P.MP, noP, rt.P.ID)
	fmt.Fprintf(b, "\tCMPQ R13, %s+%d(SB)\n\tJCC %s\n", ringSym(), ringlayout.SlotsAt, noSlot)
}

// countCalls writes record's counting, for a tracer that wants only
// counts (-stats), the P's id in R13 and the elapsed time at 8(SP).
func countCalls(b *bytes.Buffer) {
	b.WriteString("count:\n")
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n", recordSite)
	siteEntry(b, countRegs{site: "R10", table: "R9", hash: "R11", idx: "CX", entry: "SI"}, "lookup", "done")
	siteCounters(b, countRegs{p: "R13", entry: "SI", tmp: "AX"})
	b.WriteString("\tMOVQ 8(SP), AX\n")
	addCount(b, countRegs{entry: "SI", elapsed: "AX"}, "", "done")
	b.WriteString("\tJMP done\n")
}

// countRegs names the registers that the counting's steps use, so that
// record, which has saved every register, and since, which keeps the
// arguments where the site reads them, share the steps.
type countRegs struct {
	site, table, hash, idx string
	p, entry, elapsed, tmp string
}

// siteEntry finds the site's entry in the tracer's table (ringlayout.DataAt,
// open addressing from the site's address / 8) and leaves its second
// word in r.entry, or goes to missing. It takes r.table, r.hash, r.idx
// and r.entry, which may be r.hash.
func siteEntry(b *bytes.Buffer, r countRegs, label, missing string) {
	siteEntryAt(b, r, label, missing, -1, ringlayout.TableMaskAt)
}

// siteEntryAt is siteEntry of the table whose offset from the ring the
// word at baseAt holds (-1: at ringlayout.DataAt), with its mask at maskAt.
func siteEntryAt(b *bytes.Buffer, r countRegs, label, missing string, baseAt, maskAt int) {
	ctl := ringSym()
	if baseAt < 0 {
		fmt.Fprintf(b, "\tLEAQ %s+%d(SB), %s\n", ctl, ringlayout.DataAt, r.table)
	} else {
		fmt.Fprintf(b, "\tMOVQ %[1]s+%[2]d(SB), %[3]s\n\tLEAQ %[1]s(SB), %[4]s\n\tADDQ %[4]s, %[3]s\n", ctl, baseAt, r.table, r.hash)
	}
	fmt.Fprintf(b, "\tMOVQ %s, %s\n\tSHRQ $3, %[2]s\n", r.site, r.hash)
	fmt.Fprintf(b, "%s:\n\tANDQ %s+%d(SB), %s\n\tMOVQ %[4]s, %[5]s\n\tSHLQ $4, %[5]s\n", label, ctl, maskAt, r.hash, r.idx)
	fmt.Fprintf(b, "\tCMPQ (%[1]s)(%[2]s*1), %[3]s\n\tJEQ %[4]sfound\n\tCMPQ (%[1]s)(%[2]s*1), $0\n\tJEQ %[5]s\n\tINCQ %[6]s\n\tJMP %[4]s\n", r.table, r.idx, r.site, label, missing, r.hash)
	fmt.Fprintf(b, "%sfound:\n\tMOVQ 8(%s)(%s*1), %s\n", label, r.table, r.idx, r.entry)
}

// siteCounters puts the address of the site's counters in BX, where
// addCount takes them: its entry in the tracer's table (r.entry) says
// where they are in the P's (whose id is in r.p), and whether a call adds
// its elapsed time to a total and to the bucket of its bit length, or
// counts one. It takes r.tmp.
func siteCounters(b *bytes.Buffer, r countRegs) {
	ctl := ringSym()
	fmt.Fprintf(b, "\tMOVQ %s+%d(SB), BX\n\tIMULQ %s, BX\n\tADDQ %[1]s+%[4]d(SB), BX\n", ctl, ringlayout.CountersSizeAt, r.p, ringlayout.CountersAt)
	fmt.Fprintf(b, "\tLEAQ %s(SB), %s\n\tADDQ %[2]s, BX\n\tMOVQ %s, %[2]s\n\tSHRQ $1, %[2]s\n\tLEAQ (BX)(%[2]s*8), BX\n", ctl, r.tmp, r.entry)
}

// addCount counts a call at the site's counters (in BX, where bucketFunc
// takes them) by r.entry, the elapsed time in r.elapsed: one that is not
// timed goes to done, a timed one on past the code. It takes DX, and
// labels that begin with label.
func addCount(b *bytes.Buffer, r countRegs, label, done string) {
	fmt.Fprintf(b, "\tTESTQ $1, %s\n\tJNE %selapsed\n\tINCQ (BX)\n\tJMP %s\n", r.entry, label, done)
	fmt.Fprintf(b, "%[1]selapsed:\n\tADDQ %[2]s, (BX)\n\tXORL DX, DX\n\tTESTQ %[2]s, %[2]s\n\tJEQ %[1]sbucket\n\tBSRQ %[2]s, DX\n\tINCQ DX\n", label, r.elapsed)
	fmt.Fprintf(b, "%sbucket:\n\tCALL %s<ABIInternal>(SB)\n", label, constName(ringlayout.Bucket))
}

// bucketFunc writes ringlayout.Bucket, which adds one to bucket DX (at most
// ringlayout.HistBuckets-1: a larger DX is that bucket) of the site's
// counters at BX, behind their total: a tree of a compare for each bit
// of DX, down to an increment at a constant offset for each bucket.
// It goes with record, DUPOK as record is.
func bucketFunc(b *bytes.Buffer) {
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $0\n", constName(ringlayout.Bucket), flagDUPOK|flagNOSPLIT|flagNOFRAME)
	bucketTree(b, 0, ringlayout.HistBuckets)
}

// bucketTree writes the tree for the buckets from lo up to hi: the lower
// half falls through, the upper half is a jump away.
func bucketTree(b *bytes.Buffer, lo, hi int) {
	if hi-lo == 1 {
		fmt.Fprintf(b, "\tINCQ %d(BX)\n\tRET\n", 8*(1+lo))
		return
	}
	mid := (lo + hi) / 2
	fmt.Fprintf(b, "\tCMPQ DX, $%d\n\tJCC b%d_%d\n", mid, mid, hi)
	bucketTree(b, lo, mid)
	fmt.Fprintf(b, "b%d_%d:\n", mid, hi)
	bucketTree(b, mid, hi)
}

// sysProcessVMReadv is process_vm_readv's number on linux/amd64, whichever
// machine runs usdt-toolexec.
const sysProcessVMReadv = 310

// valueReads writes record's value reads, for a site the table gives
// reads (values.Op): into the P's scratch area, zeroed first, each from
// an argument's address or a pointer an earlier read brought in, within
// its bytes; then the area onto the record. Only a read of a variable
// the probe holds (OpHeld: an argument's copy) is a plain copy: any
// other source may be memory the program unmapped or freed, or a
// header a data race tore, which the probed function need never touch,
// so it is read by process_vm_readv of the process itself, which fails
// (EFAULT) where a load would fault. Those reads are gathered, as
// iovecs in the P's batch (ringlayout.BatchAt), and read by one system call
// when a read needs their bytes for its source (OpFlush) or the reads
// end: a plan's reads of one level of its values cost one call, not
// one each. A read that failed sets its bit in the area's status word
// (values.StatusSize). The head (DI) is kept while REP MOVSB and STOSQ
// take DI, SI and CX.
func valueReads(b *bytes.Buffer) {
	where := constName(ringlayout.Where)
	fmt.Fprintf(b, "values:\n\tMOVQ %d(SP), R12\n\tTESTQ R12, R12\n\tJEQ publish\n\tMOVQ DI, %d(SP)\n\tMOVQ $0, %d(SP)\n", recordArea, recordHead, recordBatch)
	// The scratch area in R11, zeroed. The ring's address is read from
	// ringlayout.Where, which this keeps in the executable.
	fmt.Fprintf(b, "\tMOVQ %d(SP), R11\n\tSHLQ $%d, R11\n\tMOVQ %s+8(SB), AX\n\tADDQ $%d, AX\n\tADDQ AX, R11\n", recordP, log2(ringlayout.AreaMax), where, ringlayout.ScratchAt)
	b.WriteString("\tMOVQ R11, DI\n\tMOVQ R12, CX\n\tSHRQ $3, CX\n\tXORL AX, AX\n\tREP; STOSQ\n")
	// The reads from R13, ended by one From none; each's bytes in CX
	// and source in SI. The gathered reads first, at the end and where
	// this one's source is among their bytes.
	fmt.Fprintf(b, "\tMOVQ %d(SP), R13\nread:\n\tMOVBQZX %d(R13), AX\n\tCMPQ %d(SP), $0\n\tJEQ gathered\n", recordPlan, ringlayout.OpFrom, recordBatch)
	fmt.Fprintf(b, "\tCMPQ AX, $%d\n\tJEQ flush\n\tCMPB %d(R13), $0\n\tJNE flush\ngathered:\n", valueop.FromNone, ringlayout.OpFlush)
	fmt.Fprintf(b, "\tCMPQ AX, $%d\n\tJEQ readsdone\n\tMOVWQZX %d(R13), CX\n", valueop.FromNone, ringlayout.OpMax)
	fmt.Fprintf(b, "\tCMPQ AX, $%d\n\tJNE readmem\n\tMOVBQZX %d(R13), DX\n\tDECQ DX\n\tJMI readnext\n", valueop.FromArg, ringlayout.OpArg)
	wordTo(b, "DX", "SI", "readarg")
	b.WriteString("\tJMP readcopy\n")
	fmt.Fprintf(b, "readmem:\n\tMOVWQZX %d(R13), DX\n\tMOVQ (R11)(DX*1), SI\n\tCMPQ AX, $%d\n\tJNE readcopy\n", ringlayout.OpSrc, valueop.FromSlice)
	fmt.Fprintf(b, "\tMOVQ 8(R11)(DX*1), AX\n\tMOVWQZX %d(R13), DX\n\tIMULQ DX, AX\n\tCMPQ AX, CX\n\tJCC readcopy\n\tMOVQ AX, CX\n", ringlayout.OpElem)
	fmt.Fprintf(b, "readcopy:\n\tTESTQ SI, SI\n\tJEQ readnext\n\tTESTQ CX, CX\n\tJEQ readnext\n\tMOVWQZX %d(R13), DI\n\tADDQ R11, DI\n", ringlayout.OpDst)
	fmt.Fprintf(b, "\tCMPB %d(R13), $0\n\tJEQ gather\n\tREP; MOVSB\n\tJMP readnext\n", ringlayout.OpHeld)
	// Any other read joins the batch: the area's bytes, the process's,
	// and the op.
	b.WriteString("gather:\n")
	batchTo(b, "R10")
	fmt.Fprintf(b, "\tMOVQ %d(SP), AX\n\tSHLQ $4, AX\n\tMOVQ DI, (R10)(AX*1)\n\tMOVQ CX, 8(R10)(AX*1)\n\tMOVQ SI, %d(R10)(AX*1)\n\tMOVQ CX, %d(R10)(AX*1)\n", recordBatch, ringlayout.BatchRemote, ringlayout.BatchRemote+8)
	fmt.Fprintf(b, "\tSHRQ $1, AX\n\tMOVQ R13, %d(R10)(AX*1)\n\tINCQ %d(SP)\n", ringlayout.BatchOps, recordBatch)
	fmt.Fprintf(b, "readnext:\n\tADDQ $%d, R13\n\tJMP read\n", ringlayout.OpSize)
	flushBatch(b)
	// The area onto the record.
	fmt.Fprintf(b, "readsdone:\n\tMOVQ %d(SP), DI\n\tMOVQ R11, SI\n\tSHRQ $3, R12\narea:\n\tMOVQ (SI), R10\n", recordHead)
	b.WriteString(ringWrite)
	b.WriteString("\tADDQ $8, SI\n\tDECQ R12\n\tJNE area\n")
}

// batchTo puts the address of the P's batch (ringlayout.BatchAt) in reg.
func batchTo(b *bytes.Buffer, reg string) {
	fmt.Fprintf(b, "\tMOVQ %[1]d(SP), %[2]s\n\tSHLQ $%[3]d, %[2]s\n\tADDQ %[4]s+8(SB), %[2]s\n\tADDQ $%[5]d, %[2]s\n", recordP, reg, log2(ringlayout.BatchSize), constName(ringlayout.Where), ringlayout.BatchAt)
}

// flushBatch reads the gathered reads, from the batch's start on, with
// process_vm_readv(pid, local, n, remote, n, 0) of the process itself,
// which stops at the first read that faults and says how many bytes it
// moved: the reads those cover are done, the one it stopped in failed
// (unless it is a guess, which may run past its object, and got some),
// and the call goes on from the one after it. Then it empties the batch
// and goes back to read, for the read that asked (or the end). It takes
// every register but R8, R9, R11 to R13, which it keeps.
func flushBatch(b *bytes.Buffer) {
	fmt.Fprintf(b, "flush:\n\tMOVQ $0, %d(SP)\n", recordBatchAt)
	b.WriteString("flushcall:\n")
	batchTo(b, "R10")
	fmt.Fprintf(b, "\tMOVQ %d(SP), AX\n\tMOVQ %d(SP), DX\n\tSUBQ AX, DX\n\tSHLQ $4, AX\n\tLEAQ (R10)(AX*1), SI\n\tLEAQ %d(R10)(AX*1), R10\n", recordBatchAt, recordBatch, ringlayout.BatchRemote)
	fmt.Fprintf(b, "\tMOVQ R8, %d(SP)\n\tMOVQ R9, %d(SP)\n\tMOVQ R11, %d(SP)\n", recordSaved, recordSaved+8, recordSaved+16)
	fmt.Fprintf(b, "\tMOVQ %s+%d(SB), DI\n\tMOVQ DX, R8\n\tXORL R9, R9\n\tMOVL $%d, AX\n\tSYSCALL\n", ringSym(), ringlayout.PidAt, sysProcessVMReadv)
	fmt.Fprintf(b, "\tMOVQ %d(SP), R8\n\tMOVQ %d(SP), R9\n\tMOVQ %d(SP), R11\n", recordSaved, recordSaved+8, recordSaved+16)
	// The bytes moved in DX (none on an error), the read at hand in AX,
	// its length in SI.
	b.WriteString("\tMOVQ AX, DX\n\tTESTQ DX, DX\n\tJPL moved\n\tXORL DX, DX\nmoved:\n")
	batchTo(b, "R10")
	fmt.Fprintf(b, "\tMOVQ %d(SP), AX\nwalk:\n\tCMPQ AX, %d(SP)\n\tJCC flushed\n\tMOVQ AX, CX\n\tSHLQ $4, CX\n\tMOVQ 8(R10)(CX*1), SI\n", recordBatchAt, recordBatch)
	b.WriteString("\tCMPQ DX, SI\n\tJCS stopped\n\tSUBQ SI, DX\n\tINCQ AX\n\tJMP walk\n")
	// Stopped in read AX, having moved DX of its bytes.
	fmt.Fprintf(b, "stopped:\n\tMOVQ AX, CX\n\tSHLQ $3, CX\n\tMOVQ %d(R10)(CX*1), SI\n\tCMPB %d(SI), $0\n\tJEQ readfail\n\tTESTQ DX, DX\n\tJNE resume\n", ringlayout.BatchOps, ringlayout.OpGuess)
	fmt.Fprintf(b, "readfail:\n\tSUBQ %d(SP), SI\n\tSHRQ $%d, SI\n\tBTSL SI, (R11)\n", recordPlan, log2(ringlayout.OpSize))
	fmt.Fprintf(b, "resume:\n\tINCQ AX\n\tMOVQ AX, %d(SP)\n\tCMPQ AX, %d(SP)\n\tJCS flushcall\n", recordBatchAt, recordBatch)
	fmt.Fprintf(b, "flushed:\n\tMOVQ $0, %d(SP)\n\tJMP read\n", recordBatch)
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}
