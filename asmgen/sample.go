package asmgen

import (
	"bytes"
	"fmt"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// sampleCalls writes record's sampling (ringlayout.SamplingAt), at
// sample: the site's role from its entry in the table of plans, the
// goroutine's open calls from its slot (ringlayout.GoTableAt). An entry
// with none open is a root, sampled at the ring's rate or by the W3C
// flag of its incoming trace context, and its slot remembers that; an
// entry under it counts one more open, an exit one less, and both
// follow the root; another probe follows an open root or is sampled on
// its own. A sampled event goes on at sampled, with the P's id in R13,
// as record left it; one not sampled writes nothing, or with
// ringlayout.CompactAt a compact record at its exit (compactRecord).
// A site the table lacks is recorded. Only the goroutine writes its
// slot; two goroutines whose ids share a slot may take each other's
// choices, never more.
func sampleCalls(b *bytes.Buffer, rt Runtime) {
	ctl := ringSym()
	fmt.Fprintf(b, "sample:\n\tMOVQ %d(SP), R10\n", recordSite)
	siteEntry(b, countRegs{site: "R10", table: "R9", hash: "R11", idx: "AX", entry: "SI"}, "role", "sampledc")
	fmt.Fprintf(b, "\tMOVQ SI, R8\n\tSHRQ $%d, R8\n", ringlayout.PlanFlagsShift)
	// The slot in R9, the goroutine's key in AX, its open calls in DX.
	fmt.Fprintf(b, "\tMOVQ %d(R14), AX\n\tMOVQ AX, R9\n\tANDQ $%d, R9\n\tSHLQ $%d, R9\n\tLEAQ %s+%d(SB), R11\n\tADDQ R11, R9\n\tORQ %[4]s+%[6]d(SB), AX\n",
		rt.Goid, ringlayout.GoSlots-1, log2(ringlayout.GoSlotSize), ctl, ringlayout.GoTableAt, ringlayout.EpochAt)
	b.WriteString("\tXORL DX, DX\n\tCMPQ (R9), AX\n\tJNE slot\n\tMOVQ 8(R9), DX\nslot:\n")
	fmt.Fprintf(b, "\tTESTQ $%d, R8\n\tJNE sentry\n\tTESTQ $%d, R8\n\tJNE sexit\n", ringlayout.FlagEntry, ringlayout.FlagExit)
	follow := fmt.Sprintf("\tBTQ $%d, DX\n\tJCS sampledc\n\tJMP unsampled\n", ringlayout.GoSampledBit)
	b.WriteString("\tTESTL DX, DX\n\tJEQ sown\n" + follow + "sown:\n")
	sampleChoice(b, "own")
	fmt.Fprintf(b, "\tBTQ $0, R10\n\tJCS sampledc\n\tMOVQ R10, DX\n\tSHRQ $1, DX\n\tSHLQ $%d, DX\n\tJMP unsampled\n", ringlayout.GoCallerBit)
	b.WriteString("sentry:\n\tTESTL DX, DX\n\tJNE sdeeper\n")
	sampleChoice(b, "root")
	fmt.Fprintf(b, "\tMOVQ R10, DX\n\tSHRQ $1, DX\n\tSHLQ $%d, DX\n\tANDQ $1, R10\n\tSHLQ $%d, R10\n\tORQ R10, DX\n\tINCQ DX\n\tJMP sstore\nsdeeper:\n\tINCQ DX\nsstore:\n\tMOVQ AX, (R9)\n\tMOVQ DX, 8(R9)\n", ringlayout.GoCallerBit, ringlayout.GoSampledBit)
	b.WriteString(follow)
	b.WriteString("sexit:\n\tTESTL DX, DX\n\tJEQ unsampled\n\tDECQ DX\n\tMOVQ AX, (R9)\n\tMOVQ DX, 8(R9)\n" + follow)
	fmt.Fprintf(b, "sampledc:\n\tMOVQ %d(SP), R13\n\tJMP sampled\n", recordP)
	leftOut(b)
	compactRecord(b, rt)
}

// leftOut writes, at unsampled, what a call that sampling left out
// leaves: nothing at an entry whose exit is traced; at its exit (or a
// probe's fire), a count of the calls whose callers chose (the P's
// LeftCallerAt), and a count at the site's counters, as Counts counts
// (ringlayout.CountLeftAt), its error too where it is not nil; else a
// compact record (compactRecord). It takes the site's role in R8 and
// the goroutine's slot's word in DX.
func leftOut(b *bytes.Buffer) {
	ctl := ringSym()
	fmt.Fprintf(b, "unsampled:\n\tTESTQ $%d, R8\n\tJNE done\n\tMOVQ %d(SP), R13\n", ringlayout.FlagEntry, recordP)
	fmt.Fprintf(b, "\tBTQ $%d, DX\n\tJCC lnotcaller\n\tMOVQ R13, BX\n\tSHLQ $%d, BX\n\tLEAQ %s+%d(SB), AX\n\tADDQ AX, BX\n\tINCQ %d(BX)\nlnotcaller:\n",
		ringlayout.GoCallerBit, log2(ringlayout.HeaderSize), ctl, ringlayout.HeadersAt, ringlayout.LeftCallerAt)
	fmt.Fprintf(b, "\tCMPQ %s+%d(SB), $0\n\tJEQ compact\n", ctl, ringlayout.CountLeftAt)
	// R12: 1 where the site's error result is not nil.
	fmt.Fprintf(b, "\tXORL R12, R12\n\tMOVQ R8, CX\n\tSHRQ $%d, CX\n\tANDQ $15, CX\n\tJEQ lfailed\n\tDECQ CX\n", ringlayout.FlagErrorShift)
	wordTo(b, "CX", "SI", "lerr")
	b.WriteString("\tTESTQ SI, SI\n\tJEQ lfailed\n\tCMPQ (SI), $0\n\tJEQ lfailed\n\tMOVL $1, R12\nlfailed:\n")
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n", recordSite)
	siteEntryAt(b, countRegs{site: "R10", table: "R9", hash: "R11", idx: "CX", entry: "SI"}, "left", "done", ringlayout.CountTableAt, ringlayout.CountMaskAt)
	siteCounters(b, countRegs{p: "R13", entry: "SI", tmp: "AX"})
	fmt.Fprintf(b, "\tTESTQ R12, R12\n\tJEQ lcount\n\tINCQ %d(BX)\nlcount:\n\tMOVQ 8(SP), AX\n", 8*(1+ringlayout.HistBuckets))
	addCount(b, countRegs{entry: "SI", elapsed: "AX"}, "left", "done")
	b.WriteString("\tJMP done\n")
}

// sampleChoice writes the choice of a root (or of a probe outside any
// call) into R10: bit 0 set when it is sampled, bit 1 when its incoming
// trace context chose, with the site's role in R8, keeping AX, DX, R8
// and R9. A root whose entry passes an incoming W3C traceparent (the
// role names its word, a C string the probe copied: memory it holds)
// follows its sampled flag: the low bit of the last hex digit, which is
// the character's own for 0-9 and the other for a-f. Any other is
// sampled when the P's next random number (xorshift64, at
// ringlayout.RandAt in its header) is below ringlayout.SampleAt.
func sampleChoice(b *bytes.Buffer, label string) {
	ctl := ringSym()
	fmt.Fprintf(b, "\tMOVQ R8, CX\n\tSHRQ $%d, CX\n\tANDQ $15, CX\n\tJEQ %sratio\n\tDECQ CX\n", ringlayout.FlagContextShift, label)
	wordTo(b, "CX", "SI", label+"ctx")
	fmt.Fprintf(b, "\tTESTQ SI, SI\n\tJEQ %sratio\n", label)
	// "vv-" 32 hex digits "-" 16 "-" 2: 55 bytes.
	for _, at := range []int{2, 35, 52} {
		fmt.Fprintf(b, "\tCMPB %d(SI), $0x2d\n\tJNE %sratio\n", at, label)
	}
	fmt.Fprintf(b, "\tCMPB 54(SI), $0\n\tJEQ %[1]sratio\n\tCMPB 55(SI), $0\n\tJNE %[1]sratio\n", label)
	fmt.Fprintf(b, "\tMOVBQZX 54(SI), R10\n\tMOVQ R10, CX\n\tANDQ $1, R10\n\tORQ $2, R10\n\tCMPQ CX, $0x61\n\tJCS %[1]sdecided\n\tXORQ $1, R10\n\tJMP %[1]sdecided\n", label)
	fmt.Fprintf(b, "%sratio:\n\tMOVQ %d(SP), R11\n\tSHLQ $%d, R11\n\tLEAQ %s+%d(SB), CX\n\tADDQ CX, R11\n\tMOVQ %d(R11), CX\n", label, recordP, log2(ringlayout.HeaderSize), ctl, ringlayout.HeadersAt, ringlayout.RandAt)
	// A state of 0 would stay 0: the key is not.
	fmt.Fprintf(b, "\tTESTQ CX, CX\n\tJNE %sseeded\n\tMOVQ AX, CX\n%[1]sseeded:\n", label)
	b.WriteString("\tMOVQ CX, SI\n\tSHLQ $13, SI\n\tXORQ SI, CX\n\tMOVQ CX, SI\n\tSHRQ $7, SI\n\tXORQ SI, CX\n\tMOVQ CX, SI\n\tSHLQ $17, SI\n\tXORQ SI, CX\n")
	fmt.Fprintf(b, "\tMOVQ CX, %d(R11)\n\tXORL R10, R10\n\tCMPQ CX, %s+%d(SB)\n\tJCC %sdecided\n\tMOVL $1, R10\n%[4]sdecided:\n", ringlayout.RandAt, ctl, ringlayout.SampleAt, label)
}

// compactRecord writes, at unsampled, the compact record of a call that
// sampling left out (ringlayout.CompactBit), for a tracer that counts
// every call (ringlayout.CompactAt): at its exit, or at another probe's
// fire, not at an entry whose exit is traced. Its word is the first
// word the site passed, an exit's elapsed ns, with the bit that says the
// root's trace context chose (from DX, the goroutine's slot, or the
// choice of a probe on its own) and the error bits from the word the
// role names, a pointer to the result (memory the probe holds). It
// waits for no room: a full buffer counts it lost.
func compactRecord(b *bytes.Buffer, rt Runtime) {
	ctl := ringSym()
	fmt.Fprintf(b, "compact:\n\tCMPQ %s+%d(SB), $0\n\tJEQ done\n", ctl, ringlayout.CompactAt)
	fmt.Fprintf(b, "\tMOVQ 8(SP), R12\n\tBTRQ $%d, R12\n\tBTRQ $%d, R12\n\tBTRQ $%d, R12\n", ringlayout.CompactCaller, ringlayout.CompactError, ringlayout.CompactFailed)
	fmt.Fprintf(b, "\tBTQ $%d, DX\n\tJCC cnotcaller\n\tBTSQ $%d, R12\ncnotcaller:\n", ringlayout.GoCallerBit, ringlayout.CompactCaller)
	fmt.Fprintf(b, "\tMOVQ R8, CX\n\tSHRQ $%d, CX\n\tANDQ $15, CX\n\tJEQ cword\n\tDECQ CX\n", ringlayout.FlagErrorShift)
	wordTo(b, "CX", "SI", "cerr")
	fmt.Fprintf(b, "\tBTSQ $%d, R12\n\tTESTQ SI, SI\n\tJEQ cword\n\tCMPQ (SI), $0\n\tJEQ cword\n\tBTSQ $%d, R12\ncword:\n\tMOVQ R12, %d(SP)\n", ringlayout.CompactError, ringlayout.CompactFailed, recordHead)
	// The P's header in BX: room for the record's five words?
	fmt.Fprintf(b, "\tMOVQ %d(SP), R13\n\tMOVQ R13, BX\n\tSHLQ $%d, BX\n\tLEAQ %s+%d(SB), AX\n\tADDQ AX, BX\n", recordP, log2(ringlayout.HeaderSize), ctl, ringlayout.HeadersAt)
	fmt.Fprintf(b, "\tMOVQ %d(BX), DI\n\tMOVQ DI, SI\n\tSUBQ %d(BX), SI\n\tADDQ $%d, SI\n", ringlayout.HeadAt, ringlayout.TailAt, 8*(ringlayout.RecordWords+1))
	fmt.Fprintf(b, "\tMOVQ %s+%d(SB), R8\n\tCMPQ SI, R8\n\tJHI lost\n\tIMULQ R8, R13\n\tLEAQ %[1]s+%[3]d(SB), R9\n\tADDQ R13, R9\n\tDECQ R8\n", ctl, ringlayout.SizeAt, ringlayout.BuffersAt)
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n\tMOVQ $%d, AX\n\tORQ AX, R10\n", recordSite, uint64(1)<<ringlayout.CountShift)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ %d(R14), R10\n", rt.Goid)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n", recordTime)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ %d(R14), R10\n\tMOVQ %d(R10), R10\n\tBTSQ $%d, R10\n", rt.P.GM, rt.P.Procid, ringlayout.CompactBit)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ %d(SP), R10\n", recordHead)
	b.WriteString(ringWrite)
	fmt.Fprintf(b, "\tMOVQ DI, %d(BX)\n\tJMP done\n", ringlayout.HeadAt)
}
