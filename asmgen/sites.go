package asmgen

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
	"github.com/go-usdt/usdt/internal/ringlayout"
)

// Symbols names what Plan9Sites defines for a package, in Go's notation
// ("usdt/parser_1f2e3d4c.sites"): only the runtime's packages may define
// register-ABI (ABIInternal) assembly, and the assembler decides that by
// the package path it is given (-p), so the file is assembled under such
// a path and names every symbol in full. The package's Go code reaches
// them by //go:linkname, or, for a trampoline named as its Go declaration
// ("example.com/parser.usdtAutoFire3"), directly.
type Symbols struct {
	// Trampolines are the entry points of the probes, one per Go
	// declaration: the compiler fails on two declarations of one symbol.
	Trampolines []Trampoline
	// Sites holds the probe sites, back to back.
	Sites string
	// Table is the probe table, which Go declares as a variable too.
	Table string
	// Since is the code the trampolines that read the clock share.
	Since string
}

// Trampoline is an entry point of probes, which Go declares as
//
//	func fire(site int, a1 W1, a2 W2, ...)
//
// where each W is a 64-bit integer or a pointer, and calls with the index
// of the probe's site. It jumps to that site, the arguments left where
// the caller's register ABI put them. Its Clock says whether it reads the
// clock, so that functions with exit probes do not, one call each fewer.
type Trampoline struct {
	Symbol string
	Clock  Clock
	// Words is how many words it takes after the site index, and
	// Strings which of them (a bit each, the first word's lowest) point
	// to a C string that the ring copies.
	Words   int
	Strings uint64
}

// Clock is what a trampoline does with runtime.nanotime. A trampoline
// that reads it takes at most ClockWords words after the site.
type Clock int

const (
	NoClock Clock = iota
	// ClockSince: a1 is an exit probe's start time, which the trampoline
	// replaces with the time elapsed since.
	ClockSince
	// ClockNow: the trampoline returns the time after the probe fired,
	// an exit probe's start time.
	ClockNow
)

// siteCode is one site: the NOP the tracer patches, then a return to the
// trampoline's caller. Every site has the same size so that the trampoline
// can compute its address from the index; on amd64 the 6 bytes of NOPs and
// RET are padded with INT3 to 8 bytes, a size LEAQ can scale by. That size is
// probetable.SiteSize, which lets the table hold the first site's address
// only.
var siteCode = map[Arch]struct {
	code string
	size int
}{
	AMD64: {nop[AMD64] + "; BYTE $0xc3; BYTE $0xcc", probetable.SiteSize},
	ARM64: {nop[ARM64] + "; WORD $0xd65f03c0", probetable.SiteSize},
}

// abi describes how Go's register ABI passes a trampoline's arguments
// (site first, then the probe's arguments after the goroutine id, all
// words) and which registers the trampoline uses. The trampoline leaves
// the arguments where the caller put them: the notes name those places, so
// the caller needs no stores to the stack and, since the trampoline keeps
// the registers Go reserves (g in R14 on amd64, R28 on arm64), nothing to
// restore after the call, as it must after calling ABI0 assembly.
type abi struct {
	site, target, goid string
	// args are the registers of the first arguments; the rest are on the
	// stack, at 8(SP) and up on amd64, where the call's return address is
	// at 0(SP).
	args []string
}

var abis = map[Arch]abi{
	AMD64: {site: "AX", target: "R12", goid: "R13", args: []string{"BX", "CX", "DI", "SI", "R8", "R9", "R10", "R11"}},
	ARM64: {site: "R0", target: "R12", goid: "R13", args: []string{"R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11"}},
}

// noteReg is how a note names a register.
func noteReg(arch Arch, reg string) string {
	if arch == ARM64 {
		return "x" + reg[1:]
	}
	if strings.HasPrefix(reg, "R") {
		return "%r" + strings.ToLower(reg[1:])
	}
	return "%r" + strings.ToLower(reg)
}

// argSpecs are the argument specs of a site whose arguments have these
// kinds, the goroutine id's first, where the trampoline leaves them.
func argSpecs(arch Arch, kinds []probe.Kind) string {
	a := abis[arch]
	specs := make([]string, len(kinds))
	for i, k := range kinds {
		var at string
		switch {
		case i == 0:
			at = noteReg(arch, a.goid)
		case i <= len(a.args):
			at = noteReg(arch, a.args[i-1])
		default:
			at = fmt.Sprintf("%d(%%rsp)", 8*(i-len(a.args)))
		}
		specs[i] = spec(k, at)
	}
	return strings.Join(specs, " ")
}

// asmName spells a symbol for the assembler, which takes '·' for a dot and
// '∕' for a slash.
func asmName(symbol string) (string, error) {
	for _, c := range symbol {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/') {
			return "", fmt.Errorf("asmgen: symbol %q has %q, which assembly cannot spell", symbol, c)
		}
	}
	return strings.NewReplacer(".", "·", "/", "∕").Replace(symbol), nil
}

// trampoline writes the trampoline, which loads the goroutine id from
// runtime.g at goidOffset and jumps to the site its first argument
// numbers. With record, it first writes the event to the ring while a
// ring tracer records.
func trampoline(b *bytes.Buffer, arch Arch, name, sites string, goidOffset int64, record string, words int, strs uint64) {
	// NOFRAME even where it calls record: the assembler would otherwise
	// save BP in a frame that the jump to the site never unwinds.
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $0\n", name, flagNOSPLIT|flagNOFRAME)
	if record != "" {
		toRecord(b, arch, record, sites, words, strs)
	}
	b.WriteString(toSite(arch, sites, goidOffset, "JMP"))
}

// toSite is the code that loads the goroutine id and then jumps to, or
// calls, the site numbered by the first argument.
func toSite(arch Arch, sites string, goidOffset int64, jump string) string {
	a := abis[arch]
	if arch == ARM64 {
		return fmt.Sprintf("\tMOVD $%[3]s(SB), %[2]s\n\tADD %[1]s<<3, %[2]s, %[2]s\n\tMOVD %[4]d(g), %[5]s\n\t%[6]s (%[2]s)\n", a.site, a.target, sites, goidOffset, a.goid, jump)
	}
	return fmt.Sprintf("\tLEAQ %[3]s(SB), %[2]s\n\tLEAQ (%[2]s)(%[1]s*8), %[2]s\n\tMOVQ %[4]d(R14), %[5]s\n\t%[6]s %[2]s\n", a.site, a.target, sites, goidOffset, a.goid, jump)
}

// ClockWords is how many words after the site index a trampoline that
// reads the clock takes, all in registers on either architecture: none
// moves when it calls the site from a frame of its own.
const ClockWords = 8

// Where a site reached through since finds since's frame, above its stack
// pointer (amd64's CALL pushed the return address, arm64's frame keeps
// the link register at 0): SinceMark at SinceMarkAt, the start time the
// program read at SinceStartAt. The tracer knows by the mark the exit
// sites that since called, which alone have their start time at hand (a
// fire function that copies strings, or one with more than ClockWords
// words, computes the elapsed time in Go), and reads the start time the
// probe's elapsed time counts from. since clears the mark when the site
// returns: a stale copy on the stack must not pass a site reached another
// way for one of since's.
const (
	SinceMark    = 0x48871dba0c14d0e7
	SinceMarkAt  = 8
	SinceStartAt = SinceMarkAt + 16
)

// since writes the code the trampolines that read the clock jump to: it
// keeps the site index and the arguments across a call of
// runtime.nanotime, turns the start time into the time elapsed since, and
// calls the site. Calls, not jumps: the frame that keeps them must go
// before the return, and a site reached by a call is as safe for the
// kernel's optimized uprobe as one reached by a jump (nothing below SP
// is live).
//
// With record, a trampoline passes its count of words in R12, and since
// writes the event to the ring, with the time it read, while a ring
// tracer records; a start time the ring's record read in ticks
// (ringlayout.TicksTag) is timed in ticks. On amd64 it counts a call itself
// while the tracer counts at the exits (countTicks), and saves the other
// registers only on the way to record.
func since(b *bytes.Buffer, arch Arch, name, sites string, rt Runtime, record string) {
	goidOffset := rt.Goid
	a := abis[arch]
	regs := append([]string{a.site}, a.args[:ClockWords]...)
	mov, mark, zero := "MOVQ", SinceMarkAt-8, "$0"
	if arch == ARM64 {
		// 0(RSP) holds the return address.
		mov, mark, zero = "MOVD", SinceMarkAt, "ZR"
	}
	sp := spReg[arch]
	first := mark + 8
	words := first + 8*len(regs)
	frame := words
	if record != "" {
		frame += 8
	}
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $%d\n", name, flagNOSPLIT, frame)
	start := fmt.Sprintf("%d(%s)", first+8, sp)
	saved := 0
	if record != "" {
		fmt.Fprintf(b, "\t%s R12, %d(%s)\n", mov, words, sp)
		if arch == AMD64 {
			// The site's index and the start, which countTicks takes.
			fmt.Fprintf(b, "\tMOVQ AX, %d(SP)\n\tMOVQ BX, %s\n", first, start)
			countTicks(b, rt, sites, start)
			fmt.Fprintf(b, "\tMOVQ %d(SP), AX\n\tJMP fire\nslow:\n", first)
			saved = 2
		}
	}
	for i := saved; i < len(regs); i++ {
		fmt.Fprintf(b, "\t%s %s, %d(%s)\n", mov, regs[i], first+8*i, sp)
	}
	if record != "" && arch == AMD64 {
		ticksSince(b, start)
	}
	b.WriteString("\tCALL runtime·nanotime<ABIInternal>(SB)\n")
	if arch == ARM64 {
		// The clock's result is in R0; record takes the time in R14.
		if record != "" {
			b.WriteString("\tMOVD R0, R14\n")
		}
		fmt.Fprintf(b, "\tMOVD %s, %[2]s\n\tSUB %[2]s, R0, %[2]s\n", start, regs[1])
	} else {
		if record != "" {
			b.WriteString("\tMOVQ AX, DX\n")
		}
		fmt.Fprintf(b, "\tSUBQ %s, AX\n", start)
		if record != "" {
			b.WriteString("elapsed:\n")
		}
		fmt.Fprintf(b, "\tMOVQ AX, %s\n", regs[1])
	}
	for i := 2; i < len(regs); i++ {
		fmt.Fprintf(b, "\t%s %d(%s), %s\n", mov, first+8*i, sp, regs[i])
	}
	fmt.Fprintf(b, "\t%s %d(%s), %s\n", mov, first, sp, regs[0])
	switch {
	case record != "" && arch == ARM64:
		fmt.Fprintf(b, "\tMOVD %s(SB), R12\n\tCMP $%d, R12\n\tBNE fire\n\tMOVD %d(RSP), R12\n\tMOVD $%s(SB), R13\n\tADD R0<<3, R13, R13\n\tBL %s<ABIInternal>(SB)\nfire:\n", ringSym(), ringlayout.Recording, words, sites, record)
	case record != "":
		fmt.Fprintf(b, "\tCMPQ %s(SB), $%d\n\tJNE fire\n\tMOVQ %d(SP), R12\n%s\tCALL %s<ABIInternal>(SB)\nfire:\n", ringSym(), ringlayout.Recording, words, siteTo(sites, "R13"), record)
	}
	// The site's address goes in the target register next: it is free.
	fmt.Fprintf(b, "\t%s $%#x, %s\n\t%[1]s %[3]s, %d(%s)\n", mov, uint64(SinceMark), a.target, mark, sp)
	b.WriteString(toSite(arch, sites, goidOffset, "CALL"))
	fmt.Fprintf(b, "\t%s %s, %d(%s)\n\tRET\n", mov, zero, mark, sp)
}

// ticksSince is since's way for a start time in ticks (ringlayout.TicksTag set:
// the entry's trampoline read the time-stamp counter for a tracer that
// counts) that countTicks left to record: the time elapsed since, in ns
// by the ring's TickNsAt, goes in AX and the time in DX, as record takes
// it, and on to elapsed. A start of runtime.nanotime goes to clock.
func ticksSince(b *bytes.Buffer, start string) {
	fmt.Fprintf(b, "\tMOVQ %s, AX\n\tTESTQ AX, AX\n\tJPL clock\n%s", start, ticksTo("DX"))
	fmt.Fprintf(b, "\tMOVQ DX, CX\n\tMOVQ DX, AX\n%s\tMOVQ CX, DX\n\tJMP elapsed\nclock:\n", ticksToNs(start, "ahead"))
}

// countTicks is since's counting of a call whose start (BX, kept at
// start too) is in ticks while the tracer counts every call at its exit
// (ringlayout.EntryTicksAt): record would save every register again and check
// what since knows. It takes only the registers that hold no argument of
// the site (AX, BX, DX, R12 and R13), so since saves none of the others.
// It finds the site's counters before it reads the counter, which then
// runs in the shadow of RDTSC (about 25 cycles on the AMD EPYC of
// BENCHMARKS.md), and leaves the elapsed ns in BX for the site. Anything
// else (the ring off, no P or no buffer for it, a site the table lacks,
// the lease run out) goes to slow, which calls record.
func countTicks(b *bytes.Buffer, rt Runtime, sites, start string) {
	ctl := ringSym()
	fmt.Fprintf(b, "\tTESTQ BX, BX\n\tJPL slow\n\tCMPQ %s+%d(SB), $1\n\tJNE slow\n\tCMPQ %[1]s+%[3]d(SB), $%d\n\tJNE slow\n", ctl, ringlayout.EntryTicksAt, ringlayout.OnAt, ringlayout.Recording)
	pTo(b, rt, "slow", "slow")
	fmt.Fprintf(b, "\tLEAQ %s(SB), R12\n\tLEAQ (R12)(AX*8), R12\n", sites)
	siteEntry(b, countRegs{site: "R12", table: "BX", hash: "DX", idx: "AX", entry: "DX"}, "lookup", "slow")
	siteCounters(b, countRegs{p: "R13", entry: "DX", tmp: "AX"})
	b.WriteString("\tMOVQ DX, R13\n" + ticksTo("DX"))
	fmt.Fprintf(b, "\tCMPQ DX, %s+%d(SB)\n\tJGT slow\n\tMOVQ DX, AX\n%s", ctl, ringlayout.UntilAt, ticksToNs(start, "countahead"))
	addCount(b, countRegs{entry: "R13", elapsed: "AX"}, "count", "counted")
	b.WriteString("counted:\n\tMOVQ AX, BX\n")
}

// ticksToNs turns the ticks in AX, less the start in ticks, into the ns
// elapsed, in AX, by the ring's TickNsAt. It takes DX, and the label
// ahead. A counter a little behind on another CPU gives 0, not 2^64
// ticks.
func ticksToNs(start, ahead string) string {
	return fmt.Sprintf("\tSUBQ %[1]s, AX\n\tJPL %[4]s\n\tXORL AX, AX\n%[4]s:\n\tMULQ %[2]s+%[3]d(SB)\n\tSHRQ $32, DX, AX\n", start, ringSym(), ringlayout.TickNsAt, ahead)
}

// now writes a trampoline with ClockNow: it calls the site, then the clock,
// whose result it returns. With record, while a ring tracer records, it
// writes the event first and returns the time record read instead: the
// entry's time in the ring is the start its exit counts from. A tracer
// that counts at the exits has it read only the ticks.
func now(b *bytes.Buffer, arch Arch, name, sites string, goidOffset int64, record string, words int) {
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $0\n", name, flagNOSPLIT)
	if record != "" && arch == ARM64 {
		// The clock is never ticks here (see recordFuncARM64).
		fmt.Fprintf(b, "\tMOVD %s(SB), R12\n\tCMP $%d, R12\n\tBEQ ring\n", ringSym(), ringlayout.Recording)
		b.WriteString(toSite(arch, sites, goidOffset, "CALL"))
		b.WriteString("\tCALL runtime·nanotime<ABIInternal>(SB)\n\tRET\n")
		fmt.Fprintf(b, "ring:\n\tMOVD $%d, R12\n\tMOVD $%s(SB), R13\n\tADD R0<<3, R13, R13\n\tMOVD ZR, R14\n\tBL %s<ABIInternal>(SB)\n", words, sites, record)
		b.WriteString(toSite(arch, sites, goidOffset, "CALL"))
		b.WriteString("\tMOVD R14, R0\n\tRET\n")
		return
	}
	if record != "" {
		fmt.Fprintf(b, "\tCMPQ %s(SB), $%d\n\tJEQ ring\n", ringSym(), ringlayout.Recording)
	}
	b.WriteString(toSite(arch, sites, goidOffset, "CALL"))
	b.WriteString("\tCALL runtime·nanotime<ABIInternal>(SB)\n\tRET\n")
	if record != "" {
		// A tracer that counts calls at their exits in ticks wants only
		// the time of the entry (ringlayout.EntryTicksAt). The site keeps DX:
		// it is a NOP, and a uprobe restores every register.
		fmt.Fprintf(b, "ring:\n\tCMPQ %s+%d(SB), $1\n\tJNE record\n\tMOVQ AX, R12\n%s\tMOVQ R12, AX\n\tJMP site\n", ringSym(), ringlayout.EntryTicksAt, ticksTo("DX"))
		fmt.Fprintf(b, "record:\n\tMOVQ $%d, R12\n%s\tXORL DX, DX\n\tCALL %s<ABIInternal>(SB)\nsite:\n", words, siteTo(sites, "R13"), record)
		b.WriteString(toSite(arch, sites, goidOffset, "CALL"))
		b.WriteString("\tMOVQ DX, AX\n\tRET\n")
	}
}

// spReg is the hardware stack pointer's name in Plan9 assembly.
var spReg = map[Arch]string{AMD64: "SP", ARM64: "RSP"}

// Plan9Sites is Plan9 for packages with many probes: instead of one stub
// function per probe it writes one function holding every probe's site
// back to back, and trampolines that jump to them, so the Go code that
// fires probes can be shared between probes too. The table is laid out as Plan9 lays it
// out, with each stub address pointing into the sites. goidOffset is where
// runtime.g holds the goroutine id. Each probe's first argument is the
// goroutine id.
func Plan9Sites(arch Arch, header, pkg string, syms Symbols, rt Runtime, probes []probe.Probe) ([]byte, probetable.Layout, error) {
	goidOffset := rt.Goid
	sc, ok := siteCode[arch]
	if !ok {
		return nil, probetable.Layout{}, fmt.Errorf("asmgen: no probe sites for GOARCH=%s", arch)
	}
	sites, err := asmName(syms.Sites)
	if err != nil {
		return nil, probetable.Layout{}, err
	}
	table, err := asmName(syms.Table)
	if err != nil {
		return nil, probetable.Layout{}, err
	}
	var b bytes.Buffer
	b.WriteString(header)
	core, err := asmName(syms.Since)
	if err != nil {
		return nil, probetable.Layout{}, err
	}
	var record string
	if rt.WithRing(arch) {
		record = recordSym()
		ringDecl(&b)
	}
	clock := false
	for _, t := range syms.Trampolines {
		tramp, err := asmName(t.Symbol)
		if err != nil {
			return nil, probetable.Layout{}, err
		}
		switch t.Clock {
		case ClockSince:
			fmt.Fprintf(&b, "\nTEXT %s<ABIInternal>(SB), %d, $0\n", tramp, flagNOSPLIT|flagNOFRAME)
			if record != "" {
				fmt.Fprintf(&b, "\t%s $%d, R12\n", map[Arch]string{AMD64: "MOVQ", ARM64: "MOVD"}[arch], t.Words)
			}
			fmt.Fprintf(&b, "\tJMP %s<ABIInternal>(SB)\n", core)
			clock = true
		case ClockNow:
			now(&b, arch, tramp, sites, goidOffset, record, t.Words)
		default:
			trampoline(&b, arch, tramp, sites, goidOffset, record, t.Words, t.Strings)
		}
	}
	if clock {
		since(&b, arch, core, sites, rt, record)
	}
	if record != "" {
		recordFunc(&b, arch, rt)
		sinceFunc(&b, arch)
		nowFunc(&b, arch)
	}
	laid := make([]probe.Probe, len(probes))
	for i, p := range probes {
		kinds := p.Kinds()
		if len(kinds) == 0 || kinds[0] != probe.Int64 || len(kinds) > probe.MaxArgs {
			return nil, probetable.Layout{}, fmt.Errorf("asmgen: probe %s:%s needs the goroutine id first and at most %d arguments", p.Provider, p.Name, probe.MaxArgs)
		}
		laid[i] = p
		laid[i].Spec = argSpecs(arch, kinds)
	}
	// The sites share one line: a line of their own each would cost every
	// probe an entry in the line tables (pclntab and DWARF), about 2 bytes.
	fmt.Fprintf(&b, "\n// The probe sites, %d bytes each: the Go linker keeps a function whole.\n", sc.size)
	for i, p := range probes {
		fmt.Fprintf(&b, "// %d: %s:%s\n", i, p.Provider, p.Name)
	}
	fmt.Fprintf(&b, "TEXT %s(SB), %d, $0-0\n\t%s\n", sites, flagNOSPLIT|flagNOFRAME, strings.Join(slices.Repeat([]string{sc.code}, len(probes)), "; "))
	l, err := writeTable(&b, pkg, table, laid, true, func(i int) string { return fmt.Sprintf("%s+%d", sites, sc.size*i) })
	if err != nil {
		return nil, probetable.Layout{}, err
	}
	return b.Bytes(), l, nil
}

// Namespace is the prefix of the symbols a package's generated assembly
// defines ("usdt/parser_1f2e3d4c."): "usdt/", the last element of its
// import path and a hash of the whole path, which keeps them apart from
// every other package's, in a spelling the assembler takes.
func Namespace(importPath string) string {
	elem := []byte(importPath[strings.LastIndexByte(importPath, '/')+1:])
	for i, c := range elem {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			elem[i] = '_'
		}
	}
	h := fnv.New32a()
	h.Write([]byte(importPath))
	return fmt.Sprintf("usdt/%s_%08x.", elem, h.Sum32())
}
