package asmgen

import (
	"bytes"
	"fmt"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/ringlayout"
	"github.com/go-usdt/usdt/internal/valueop"
)

// The ring's writer on arm64 does what recordFunc's does on amd64, with
// three differences the architecture makes:
//   - every word a trampoline takes is in a register (R1 to R11), none on
//     the stack;
//   - the head is published with a store-release (STLR): arm64 may make
//     stores visible out of order, and a tracer that reads the head must
//     find the record below it whole;
//   - the clock is always runtime.nanotime: the tracer times in ticks
//     only where it can read the counter itself (amd64's TSC).
//
// A trampoline calls it by BL, which takes the link register: the
// trampoline keeps its own in R15, which record restores as it found it.

// The a64 offsets are where the arm64 record keeps, above the link
// register at 0(RSP), the registers it is called with (R0 to R11, then
// R15, so that a usdtgen probe's twelfth word, which its trampoline
// moves from R12 to R15, is word 11), then the time, the count of
// words, the strings' bits, the site's address, the P's id, the site's
// reads and its value area's bytes, process_vm_readv's two iovecs, the
// time the caller gave, if any, and, for a wait for room, its end and
// the record's size.
const (
	a64Regs      = 8
	a64Words     = a64Regs + 8 // saved R1, word 0
	a64R15       = a64Regs + 8*12
	a64Time      = a64R15 + 8
	a64Count     = a64Time + 8
	a64Strings   = a64Count + 8
	a64Site      = a64Strings + 8
	a64P         = a64Site + 8
	a64Plan      = a64P + 8
	a64Area      = a64Plan + 8
	a64Iov       = a64Area + 8
	a64Given     = a64Iov + 32
	a64Until     = a64Given + 8
	a64Size      = a64Until + 8
	a64RecordTop = a64Size + 8
)

// sysProcessVMReadvARM64 is process_vm_readv's number on linux/arm64.
const sysProcessVMReadvARM64 = 270

// ringWriteARM64 writes R25 at the head (R22) of the buffer at R24,
// masked by R23.
const ringWriteARM64 = "\tAND R23, R22, R7\n\tMOVD R25, (R24)(R7)\n\tADD $8, R22\n"

// toRecordARM64 is toRecord for arm64: the count of words and the
// strings' bits in R12, the site's address in R13, R14 zero (record reads
// the clock), the trampoline's link register kept in R15 across the BL.
func toRecordARM64(b *bytes.Buffer, record, sites string, words int, strs uint64) {
	// A frame of 16 bytes around the call, its link register at 0(RSP)
	// as a Go function's prologue keeps it: the assembler records the SP
	// adjustment (pcsp), so that a traceback taken inside record (a CPU
	// profile's, a crash's) unwinds through the trampoline to the probed
	// function. Kept in a register, the unwinder took the probed
	// function's caller's return address for the trampoline's.
	fmt.Fprintf(b, "\tMOVD %s(SB), R12\n\tCMP $%d, R12\n\tBNE fire\n\tSUB $16, RSP\n\tMOVD R30, (RSP)\n", ringSym(), ringlayout.Recording)
	fmt.Fprintf(b, "\tMOVD $%d, R12\n\tMOVD $%s(SB), R13\n\tADD R0<<3, R13, R13\n\tMOVD ZR, R14\n", uint64(words)|strs<<8, sites)
	fmt.Fprintf(b, "\tBL %s<ABIInternal>(SB)\n\tMOVD (RSP), R30\n\tADD $16, RSP\nfire:\n", record)
}

// strlenARM64 counts into R3 the bytes of the C string at R4, at most
// probe.CStringMax. It takes R0.
func strlenARM64(b *bytes.Buffer, label string) {
	fmt.Fprintf(b, "\tMOVD $0, R3\n%[1]s:\n\tMOVBU (R4)(R3), R0\n\tCBZ R0, %[1]send\n\tADD $1, R3\n\tCMP $%[2]d, R3\n\tBLO %[1]s\n%[1]send:\n", label, probe.CStringMax)
}

// siteEntryARM64 is siteEntry for arm64: the entry's second word in R5,
// with the ring at R19. It takes R6 and R8 to R11.
func siteEntryARM64(b *bytes.Buffer, label, missing string) {
	fmt.Fprintf(b, "\tMOVD %d(RSP), R10\n\tLSR $3, R10, R11\n\tMOVD %d(R19), R8\n\tADD $%d, R19, R9\n", a64Site, ringlayout.TableMaskAt, ringlayout.DataAt)
	fmt.Fprintf(b, "%[1]s:\n\tAND R8, R11\n\tLSL $4, R11, R6\n\tMOVD (R9)(R6), R5\n\tCMP R10, R5\n\tBEQ %[1]sfound\n\tCBZ R5, %[2]s\n\tADD $1, R11\n\tB %[1]s\n", label, missing)
	fmt.Fprintf(b, "%[1]sfound:\n\tADD R9, R6, R6\n\tMOVD 8(R6), R5\n", label)
}

// recordFuncARM64 is recordFunc for arm64. Called with the words in R1 to
// R11, the count and the strings' bits in R12, the site's address in R13
// and the time in R14, or 0 to read the clock, it returns the registers
// it was called with, R12 and R13 aside, R14 holding the event's time.
// Only the P's goroutine writes its buffer (assembly is never preempted),
// so the only atomic operations are those the Ps share: the count of
// events without a buffer, and the lease's expiry.
func recordFuncARM64(b *bytes.Buffer, rt Runtime) {
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $%d\n", recordSym(), flagDUPOK|flagNOSPLIT, a64RecordTop)
	for i := range 12 {
		fmt.Fprintf(b, "\tMOVD R%d, %d(RSP)\n", i, a64Regs+8*i)
	}
	fmt.Fprintf(b, "\tMOVD R15, %d(RSP)\n\tMOVD R13, %d(RSP)\n\tAND $0xff, R12, R0\n\tMOVD R0, %d(RSP)\n\tLSR $8, R12, R0\n\tMOVD R0, %d(RSP)\n", a64R15, a64Site, a64Count, a64Strings)
	fmt.Fprintf(b, "\tMOVD R14, %d(RSP)\n\tCBNZ R14, timed\n\tBL runtime·nanotime<ABIInternal>(SB)\n\tMOVD R0, R14\ntimed:\n", a64Given)
	fmt.Fprintf(b, "\tMOVD R14, %d(RSP)\n\tMOVD $%s(SB), R19\n\tMOVD %d(R19), R0\n\tCMP R0, R14\n\tBGT expire\n", a64Time, ringSym(), ringlayout.UntilAt)
	// The P's id in R20.
	fmt.Fprintf(b, "\tMOVD %d(g), R20\n\tMOVD %d(R20), R20\n\tCBZ R20, done\n\tMOVWU %d(R20), R20\n", rt.P.GM, rt.P.MP, rt.P.ID)
	fmt.Fprintf(b, "\tMOVD %d(R19), R0\n\tCMP R0, R20\n\tBHS noslot\n\tMOVD R20, %d(RSP)\n", ringlayout.SlotsAt, a64P)
	fmt.Fprintf(b, "\tMOVD %d(R19), R0\n\tCMP $%d, R0\n\tBEQ count\n", ringlayout.ModeAt, ringlayout.Counts)
	// The record's size in R2; R15 points to the words.
	fmt.Fprintf(b, "\tADD $%d, RSP, R15\n\tMOVD %d(RSP), R2\n\tADD $%d, R2\n\tLSL $3, R2\n", a64Words, a64Count, ringlayout.RecordWords)
	fmt.Fprintf(b, "\tMOVD %d(RSP), R12\n\tCBZ R12, sized\n\tMOVD $0, R11\nsize:\n\tLSR R11, R12, R0\n\tTBZ $0, R0, sizenext\n\tMOVD (R15)(R11<<3), R4\n", a64Strings)
	strlenARM64(b, "sizelen")
	fmt.Fprintf(b, "\tADD $15, R3\n\tAND $~7, R3\n\tADD R3, R2\nsizenext:\n\tADD $1, R11\n\tMOVD %d(RSP), R0\n\tCMP R0, R11\n\tBLO size\nsized:\n", a64Count)
	// The value area's bytes, with the site's reads.
	fmt.Fprintf(b, "\tMOVD ZR, %d(RSP)\n\tMOVD %d(R19), R0\n\tCBZ R0, planned\n", a64Area, ringlayout.PlansAt)
	siteEntryARM64(b, "plan", "planned")
	fmt.Fprintf(b, "\tLSR $32, R5, R0\n\tADD R0, R2\n\tMOVD R0, %d(RSP)\n\tMOVWU R5, R5\n\tADD R19, R5\n\tMOVD R5, %d(RSP)\nplanned:\n", a64Area, a64Plan)
	// The P's header in R21; room for the record below the tracer's
	// tail?
	fmt.Fprintf(b, "\tLSL $%d, R20, R21\n\tADD $%d, R21\n\tADD R19, R21\n", log2(ringlayout.HeaderSize), ringlayout.HeadersAt)
	fmt.Fprintf(b, "\tMOVD %d(R21), R22\n\tMOVD %d(R21), R0\n\tSUB R0, R22, R0\n\tADD R2, R0\n", ringlayout.HeadAt, ringlayout.TailAt)
	fmt.Fprintf(b, "\tMOVD %d(R19), R23\n\tCMP R23, R0\n\tBHI full\nroomy:\n", ringlayout.SizeAt)
	// The buffer in R24, the mask in R23.
	fmt.Fprintf(b, "\tMUL R23, R20, R24\n\tADD $%d, R24\n\tADD R19, R24\n\tSUB $1, R23\n", ringlayout.BuffersAt)
	// The site's address, the count of words and which are strings; the
	// goroutine; the time; the thread, marked after a drop.
	fmt.Fprintf(b, "\tMOVD %d(RSP), R25\n\tMOVD %d(RSP), R0\n\tLSL $%d, R0\n\tORR R0, R25\n\tMOVD %d(RSP), R0\n\tLSL $%d, R0\n\tORR R0, R25\n", a64Site, a64Count, ringlayout.CountShift, a64Strings, ringlayout.StringsShift)
	b.WriteString(ringWriteARM64)
	fmt.Fprintf(b, "\tMOVD %d(g), R25\n", rt.Goid)
	b.WriteString(ringWriteARM64)
	fmt.Fprintf(b, "\tMOVD %d(RSP), R25\n", a64Time)
	b.WriteString(ringWriteARM64)
	fmt.Fprintf(b, "\tMOVD %d(g), R25\n\tMOVD %d(R25), R25\n", rt.P.GM, rt.P.Procid)
	fmt.Fprintf(b, "\tMOVD %d(R21), R0\n\tMOVD %d(R21), R1\n\tCMP R0, R1\n\tBEQ unbroken\n\tMOVD R0, %[2]d(R21)\n\tORR $%#x, R25\nunbroken:\n", ringlayout.LostAt, ringlayout.LostSeenAt, uint64(1)<<ringlayout.AfterLossBit)
	fmt.Fprintf(b, "\tMOVD %d(RSP), R0\n\tCBZ R0, owntime\n\tORR $%#x, R25\nowntime:\n", a64Given, uint64(1)<<ringlayout.CallerTimeBit)
	b.WriteString(ringWriteARM64)
	// The words.
	fmt.Fprintf(b, "\tMOVD %d(RSP), R12\n\tMOVD $0, R13\nword:\n\tCMP R12, R13\n\tBHS strings\n\tMOVD (R15)(R13<<3), R25\n", a64Count)
	b.WriteString(ringWriteARM64)
	b.WriteString("\tADD $1, R13\n\tB word\n")
	// The strings.
	fmt.Fprintf(b, "strings:\n\tMOVD %d(RSP), R12\n\tCBZ R12, values\n\tMOVD $0, R13\nstring:\n\tLSR R13, R12, R0\n\tTBZ $0, R0, strnext\n\tMOVD (R15)(R13<<3), R4\n", a64Strings)
	strlenARM64(b, "strlen")
	b.WriteString("\tMOVD R3, R25\n")
	b.WriteString(ringWriteARM64)
	b.WriteString("\tADD $7, R3\n\tLSR $3, R3\n\tCBZ R3, strnext\nstrcopy:\n\tMOVD.P 8(R4), R25\n")
	b.WriteString(ringWriteARM64)
	fmt.Fprintf(b, "\tSUB $1, R3\n\tCBNZ R3, strcopy\nstrnext:\n\tADD $1, R13\n\tMOVD %d(RSP), R0\n\tCMP R0, R13\n\tBLO string\n", a64Count)
	valueReadsARM64(b)
	// The head last, released: a tracer that reads it reads the record.
	fmt.Fprintf(b, "publish:\n\tADD $%d, R21, R0\n\tSTLR R22, (R0)\n\tB done\n", ringlayout.HeadAt)
	waitForRoomARM64(b)
	fmt.Fprintf(b, "lost:\n\tMOVD %[1]d(R21), R0\n\tADD $1, R0\n\tMOVD R0, %[1]d(R21)\n\tB done\n", ringlayout.LostAt)
	countCallsARM64(b)
	fmt.Fprintf(b, "noslot:\n\tADD $%d, R19, R0\nnoslotadd:\n\tLDAXR (R0), R1\n\tADD $1, R1\n\tSTLXR R1, (R0), R2\n\tCBNZ R2, noslotadd\n\tB done\n", ringlayout.NoSlotAt)
	// The first writer past the lease takes the tracer's probes down
	// (cleanListARM64); the exclusive pair decides which.
	fmt.Fprintf(b, "expire:\n\tADD $%d, R19, R9\nexpiring:\n\tLDAXR (R9), R0\n\tCMP $%d, R0\n\tBNE done\n\tMOVD $%d, R1\n\tSTLXR R1, (R9), R2\n\tCBNZ R2, expiring\n", ringlayout.OnAt, ringlayout.Recording, ringlayout.Expiring)
	fmt.Fprintf(b, "\tMOVD %d(R19), R12\n\tADD $%d, R19, R13\n\tCBZ R12, off\n", ringlayout.ListLenAt, ringlayout.ListAt)
	cleanListARM64(b)
	b.WriteString("off:\n\tSTLR ZR, (R9)\n")
	b.WriteString("done:\n")
	for i := range 12 {
		fmt.Fprintf(b, "\tMOVD %d(RSP), R%d\n", a64Regs+8*i, i)
	}
	fmt.Fprintf(b, "\tMOVD %d(RSP), R15\n\tMOVD %d(RSP), R14\n\tRET\n", a64R15, a64Time)
}

// sysSchedYieldARM64 is sched_yield's number on linux/arm64.
const sysSchedYieldARM64 = 124

// waitForRoomARM64 is waitForRoom for arm64, the P's header in R21, the
// record's size in R2: it goes on at roomy with R2, R15 and R19 to R23
// as the writer had them, to lost, or to expire past the tracer's lease. The clock's call keeps no register, so
// each turn computes them again.
func waitForRoomARM64(b *bytes.Buffer) {
	fmt.Fprintf(b, "full:\n\tMOVD %d(R19), R0\n\tCBZ R0, lost\n", ringlayout.BlockAt)
	fmt.Fprintf(b, "\tMOVD %d(R21), R0\n\tADD $1, R0\n\tMOVD %d(R21), R1\n\tCMP R0, R1\n\tBEQ lost\n", ringlayout.TailAt, ringlayout.GaveUpAt)
	fmt.Fprintf(b, "\tMOVD ZR, %d(RSP)\n\tMOVD R2, %d(RSP)\n", a64Until, a64Size)
	fmt.Fprintf(b, "wait:\n\tMOVD $%d, R8\n\tSVC\n", sysSchedYieldARM64)
	header := fmt.Sprintf("\tMOVD $%s(SB), R19\n\tMOVD %d(RSP), R20\n\tLSL $%d, R20, R21\n\tADD $%d, R21\n\tADD R19, R21\n", ringSym(), a64P, log2(ringlayout.HeaderSize), ringlayout.HeadersAt)
	b.WriteString(header)
	fmt.Fprintf(b, "\tMOVD %d(RSP), R2\n\tADD $%d, RSP, R15\n\tMOVD %d(R21), R22\n\tMOVD %d(R19), R0\n\tCMP $%d, R0\n\tBNE lost\n", a64Size, a64Words, ringlayout.HeadAt, ringlayout.OnAt, ringlayout.Recording)
	fmt.Fprintf(b, "\tMOVD %d(R21), R0\n\tSUB R0, R22, R0\n\tADD R2, R0\n\tMOVD %d(R19), R23\n\tCMP R23, R0\n\tBLS roomy\n", ringlayout.TailAt, ringlayout.SizeAt)
	// The first time read sets the bound: the event's own may be a
	// caller's, older.
	// A tracer past its lease is gone: expire, as any writer would.
	fmt.Fprintf(b, "\tBL runtime·nanotime<ABIInternal>(SB)\n\tMOVD $%s(SB), R19\n\tMOVD %d(R19), R1\n\tCMP R1, R0\n\tBGT expire\n", ringSym(), ringlayout.UntilAt)
	fmt.Fprintf(b, "\tMOVD %d(RSP), R1\n\tCBNZ R1, waitcmp\n", a64Until)
	fmt.Fprintf(b, "\tMOVD %d(R19), R1\n\tADD R0, R1\n\tMOVD R1, %d(RSP)\n\tB wait\n", ringlayout.BlockAt, a64Until)
	b.WriteString("waitcmp:\n\tCMP R1, R0\n\tBLO wait\n")
	b.WriteString(header)
	fmt.Fprintf(b, "\tMOVD %d(R21), R0\n\tADD $1, R0\n\tMOVD R0, %d(R21)\n", ringlayout.TailAt, ringlayout.GaveUpAt)
}

// cleanListARM64 is cleanList for arm64: R12 entries from R13, the
// entry's compare-and-swap and the 16-bit decrement by exclusive pairs.
// It takes R0 to R2 and R10.
func cleanListARM64(b *bytes.Buffer) {
	fmt.Fprintf(b, "clean:\n\tMOVD (R13), R10\n\tTBNZ $%d, R10, narrow\n\tMOVH ZR, 2(R10)\n\tB cleannext\n", log2(ringlayout.ListNarrow))
	fmt.Fprintf(b, "narrow:\n\tLDAXR (R13), R0\n\tLSR $48, R0, R1\n\tCMP $%d, R1\n\tBNE cleannext\n", (ringlayout.ListNarrow|ringlayout.ListRaised)>>48)
	fmt.Fprintf(b, "\tMOVD $%d, R1\n\tBIC R1, R0, R1\n\tSTLXR R1, (R13), R2\n\tCBNZ R2, narrow\n\tAND $%#x, R0, R10\n", uint64(ringlayout.ListRaised), uint64(ringlayout.ListAddr))
	b.WriteString("decrement:\n\tLDAXRH (R10), R0\n\tSUB $1, R0\n\tSTLXRH R0, (R10), R1\n\tCBNZ R1, decrement\n")
	b.WriteString("cleannext:\n\tADD $8, R13\n\tSUB $1, R12\n\tCBNZ R12, clean\n")
}

// countCallsARM64 is countCalls for arm64, the P's id in R20.
func countCallsARM64(b *bytes.Buffer) {
	b.WriteString("count:\n")
	siteEntryARM64(b, "lookup", "done")
	// The site's counters in R1: the P's, then the site's first.
	fmt.Fprintf(b, "\tMOVD %d(R19), R1\n\tMUL R20, R1\n\tMOVD %d(R19), R0\n\tADD R0, R1\n\tADD R19, R1\n", ringlayout.CountersSizeAt, ringlayout.CountersAt)
	b.WriteString("\tLSR $1, R5, R2\n\tADD R2<<3, R1, R1\n\tTBNZ $0, R5, elapsed\n\tMOVD (R1), R0\n\tADD $1, R0\n\tMOVD R0, (R1)\n\tB done\n")
	fmt.Fprintf(b, "elapsed:\n\tMOVD %d(RSP), R0\n\tMOVD (R1), R3\n\tADD R0, R3\n\tMOVD R3, (R1)\n", a64Words)
	fmt.Fprintf(b, "\tCLZ R0, R2\n\tMOVD $64, R3\n\tSUB R2, R3, R2\n\tCMP $%[1]d, R2\n\tBLS bucket\n\tMOVD $%[1]d, R2\n", ringlayout.HistBuckets-1)
	b.WriteString("bucket:\n\tADD $8, R1\n\tADD R2<<3, R1, R1\n\tMOVD (R1), R0\n\tADD $1, R0\n\tMOVD R0, (R1)\n\tB done\n")
}

// valueReadsARM64 is valueReads for arm64: the P's scratch area in R11,
// the reads from R13, each one's bytes in R2, source in R4 and
// destination in R1. A system call keeps every register but R0.
func valueReadsARM64(b *bytes.Buffer) {
	fmt.Fprintf(b, "values:\n\tMOVD %d(RSP), R12\n\tCBZ R12, publish\n", a64Area)
	fmt.Fprintf(b, "\tMOVD %d(RSP), R11\n\tLSL $%d, R11\n\tMOVD $%s(SB), R0\n\tMOVD 8(R0), R0\n\tADD $%d, R0\n\tADD R0, R11\n", a64P, log2(ringlayout.AreaMax), constName(ringlayout.Where), ringlayout.ScratchAt)
	b.WriteString("\tMOVD R11, R1\n\tLSR $3, R12, R2\nzero:\n\tMOVD.P ZR, 8(R1)\n\tSUB $1, R2\n\tCBNZ R2, zero\n")
	fmt.Fprintf(b, "\tMOVD %d(RSP), R13\nread:\n\tMOVBU %d(R13), R0\n\tCMP $%d, R0\n\tBEQ readsdone\n\tMOVHU %d(R13), R2\n", a64Plan, ringlayout.OpFrom, valueop.FromNone, ringlayout.OpMax)
	fmt.Fprintf(b, "\tCMP $%d, R0\n\tBNE readmem\n\tMOVBU %d(R13), R3\n\tSUBS $1, R3\n\tBMI readnext\n\tMOVD (R15)(R3<<3), R4\n\tB readcopy\n", valueop.FromArg, ringlayout.OpArg)
	fmt.Fprintf(b, "readmem:\n\tMOVHU %d(R13), R3\n\tMOVD (R11)(R3), R4\n\tCMP $%d, R0\n\tBNE readcopy\n", ringlayout.OpSrc, valueop.FromSlice)
	fmt.Fprintf(b, "\tADD R11, R3\n\tMOVD 8(R3), R0\n\tMOVHU %d(R13), R3\n\tMUL R3, R0\n\tCMP R2, R0\n\tBHS readcopy\n\tMOVD R0, R2\n", ringlayout.OpElem)
	fmt.Fprintf(b, "readcopy:\n\tCBZ R4, readnext\n\tCBZ R2, readnext\n\tMOVHU %d(R13), R1\n\tADD R11, R1\n", ringlayout.OpDst)
	fmt.Fprintf(b, "\tMOVBU %d(R13), R0\n\tCBZ R0, readsafe\ncopy:\n\tMOVBU.P 1(R4), R0\n\tMOVBU.P R0, 1(R1)\n\tSUB $1, R2\n\tCBNZ R2, copy\n\tB readnext\n", ringlayout.OpHeld)
	// Any read but a held one: process_vm_readv of the process itself
	// fails (EFAULT) where a load would fault, leaving the bytes zero.
	fmt.Fprintf(b, "readsafe:\n\tMOVD R1, %d(RSP)\n\tMOVD R2, %d(RSP)\n\tMOVD R4, %d(RSP)\n\tMOVD R2, %d(RSP)\n", a64Iov, a64Iov+8, a64Iov+16, a64Iov+24)
	fmt.Fprintf(b, "\tMOVD %d(R19), R0\n\tADD $%d, RSP, R1\n\tMOVD $1, R2\n\tADD $%d, RSP, R3\n\tMOVD $1, R4\n\tMOVD $0, R5\n\tMOVD $%d, R8\n\tSVC\n", ringlayout.PidAt, a64Iov, a64Iov+16, sysProcessVMReadvARM64)
	// Failed: fewer bytes than asked, or for a guess none. Its bit, its
	// index in the plan, is set in the area's status word.
	fmt.Fprintf(b, "\tMOVD %d(RSP), R1\n\tCMP R1, R0\n\tBEQ readnext\n\tMOVBU %d(R13), R1\n\tCBZ R1, readfail\n\tCMP $0, R0\n\tBGT readnext\n", a64Iov+8, ringlayout.OpGuess)
	fmt.Fprintf(b, "readfail:\n\tMOVD %d(RSP), R1\n\tSUB R1, R13, R1\n\tLSR $%d, R1\n\tMOVD $1, R2\n\tLSL R1, R2\n\tMOVWU (R11), R1\n\tORR R2, R1\n\tMOVW R1, (R11)\n", a64Plan, log2(ringlayout.OpSize))
	fmt.Fprintf(b, "readnext:\n\tADD $%d, R13\n\tB read\n", ringlayout.OpSize)
	// The area onto the record.
	b.WriteString("readsdone:\n\tMOVD R11, R1\n\tLSR $3, R12\narea:\n\tMOVD.P 8(R1), R25\n")
	b.WriteString(ringWriteARM64)
	b.WriteString("\tSUB $1, R12\n\tCBNZ R12, area\n")
}
