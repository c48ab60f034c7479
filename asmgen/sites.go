package asmgen

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
)

// Trampoline is the one assembly entry point of every probe with Args
// arguments after the goroutine id, which the trampoline is not passed: Go
// declares it as
//
//	func Symbol(site int, a1 W1, a2 W2, ...)
//
// where each W is a 64-bit integer or a pointer, and calls it with the
// index of the probe's site. It loads the goroutine id and the arguments
// into registers and jumps to that site. Registers make the specs short
// ("8@%rbx", not "8@24(%rsp)"), and a tracer reads them from the saved
// registers instead of copying from the stack for every argument.
//
// Arguments are whole words so that probes of any kinds share it: the Go
// caller widens a narrower one as its kind says (sign- or zero-extending),
// and each site's note gives the kind's size and sign for the register.
type Trampoline struct {
	Symbol string
	Args   int
}

// Site is one probe behind a trampoline. Its Probe's Slot is its
// semaphore's; probes may share one.
type Site struct {
	Probe      probe.Probe
	Trampoline int
}

// siteCode is one site: the NOP the tracer patches, then a return to the
// trampoline's caller. Every site has the same size so that the trampoline
// can compute its address from the index; on amd64 the 5-byte NOP and RET
// are padded with INT3 to 8 bytes, a size LEAQ can scale by. That size is
// probetable.SiteSize, which lets the table hold the first site's address
// only.
var siteCode = map[Arch]struct {
	code string
	size int
}{
	AMD64: {nop[AMD64] + "; BYTE $0xc3; BYTE $0xcc; BYTE $0xcc", probetable.SiteSize},
	ARM64: {nop[ARM64] + "; WORD $0xd65f03c0", probetable.SiteSize},
}

// trampolineRegs are the registers a trampoline loads: the goroutine id,
// then the arguments in order, the last one left holding the site's
// address. ABI0 assembly may clobber them all; on amd64 that includes R14,
// which holds g until the trampoline replaces it with the goroutine id, and
// which ABIInternal callers restore after the call. On arm64 g stays in R28
// throughout: a signal handler trusts it there.
var trampolineRegs = map[Arch][]string{
	AMD64: {"R14", "AX", "BX", "CX", "DX", "SI", "DI", "R8", "R9", "R10", "R11", "R12", "R13"},
	ARM64: {"R12", "R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11"},
}

// noteReg is how a note names a register of trampolineRegs. A narrow
// argument is loaded extended to the whole register, which the note names:
// the size prefix tells the tracer how much of it to read.
func noteReg(arch Arch, reg string) string {
	if arch == ARM64 {
		return "x" + reg[1:]
	}
	if strings.HasPrefix(reg, "R") {
		return "%r" + strings.ToLower(reg[1:])
	}
	return "%r" + strings.ToLower(reg)
}

// trampoline writes t, which loads the goroutine id from runtime.g at
// goidOffset and the arguments, then jumps to site number site+0(FP) of
// sites.
func trampoline(b *bytes.Buffer, arch Arch, t Trampoline, sites string, goidOffset int64) {
	regs := trampolineRegs[arch]
	// The site index, then the arguments after the goroutine id.
	f := GoArgs(arch, slices.Repeat([]probe.Kind{probe.Uint64}, t.Args+1))
	fmt.Fprintf(b, "\nTEXT ·%s(SB), %d, $0-%d\n", t.Symbol, flagNOSPLIT|flagNOFRAME, f.Size)
	target, scratch := regs[len(regs)-1], regs[len(regs)-2]
	// The site's address first: its registers may carry arguments after.
	move := "MOVQ"
	if arch == ARM64 {
		move = "MOVD"
		fmt.Fprintf(b, "\tMOVD site+0(FP), %[1]s\n\tMOVD $·%[3]s(SB), %[2]s\n\tADD %[1]s<<3, %[2]s, %[2]s\n", scratch, target, sites)
		fmt.Fprintf(b, "\tMOVD %d(g), %s\n", goidOffset, regs[0])
	} else {
		fmt.Fprintf(b, "\tMOVQ site+0(FP), %[1]s\n\tLEAQ ·%[3]s(SB), %[2]s\n\tLEAQ (%[2]s)(%[1]s*8), %[2]s\n", scratch, target, sites)
		fmt.Fprintf(b, "\tMOVQ %d(R14), R14\n", goidOffset)
	}
	for i := 1; i <= t.Args; i++ {
		fmt.Fprintf(b, "\t%s a%d+%d(FP), %s\n", move, i, f.Offsets[i], regs[i])
	}
	fmt.Fprintf(b, jump[arch], target)
}

// registerSpecs are the argument specs of a site whose arguments have
// these kinds, the goroutine id's first, as a trampoline loads them.
func registerSpecs(arch Arch, kinds []probe.Kind) string {
	specs := make([]string, len(kinds))
	for i, k := range kinds {
		specs[i] = spec(k, noteReg(arch, trampolineRegs[arch][i]))
	}
	return strings.Join(specs, " ")
}

// jump is a trampoline's last instruction.
var jump = map[Arch]string{
	AMD64: "\tJMP %s\n",
	ARM64: "\tJMP (%s)\n",
}

// Plan9Sites is Plan9 for packages with many probes: instead of one stub
// function per probe it writes one function, sites, holding every probe's
// site back to back, and one trampoline per number of arguments, so the
// Go code that fires probes can be shared between probes too. The table
// is laid out as Plan9 lays it out, with each stub address pointing into
// sites. goidOffset is where runtime.g holds the goroutine id.
func Plan9Sites(arch Arch, header, pkg, table, sites string, goidOffset int64, tramps []Trampoline, probes []Site) ([]byte, probetable.Layout, error) {
	sc, ok := siteCode[arch]
	if !ok {
		return nil, probetable.Layout{}, fmt.Errorf("asmgen: no probe sites for GOARCH=%s", arch)
	}
	var b bytes.Buffer
	b.WriteString(header)
	for _, t := range tramps {
		// The goroutine id takes a register too, and the last one holds
		// the site's address.
		if t.Args > len(trampolineRegs[arch])-2 {
			return nil, probetable.Layout{}, fmt.Errorf("asmgen: trampoline %s has %d arguments, at most %d fit in registers", t.Symbol, t.Args+1, len(trampolineRegs[arch])-1)
		}
		trampoline(&b, arch, t, sites, goidOffset)
	}
	laid := make([]probe.Probe, len(probes))
	for i, s := range probes {
		kinds := s.Probe.Kinds()
		if s.Trampoline < 0 || s.Trampoline >= len(tramps) || len(kinds) == 0 || kinds[0] != probe.Int64 || len(kinds)-1 != tramps[s.Trampoline].Args {
			return nil, probetable.Layout{}, fmt.Errorf("asmgen: probe %s:%s does not match its trampoline", s.Probe.Provider, s.Probe.Name)
		}
		laid[i] = s.Probe
		laid[i].Spec = registerSpecs(arch, kinds)
	}
	fmt.Fprintf(&b, "\n// The probe sites, %d bytes each: the Go linker keeps a function whole.\nTEXT ·%s(SB), %d, $0-0\n", sc.size, sites, flagNOSPLIT|flagNOFRAME)
	for _, s := range probes {
		fmt.Fprintf(&b, "\t%s // %s:%s\n", sc.code, s.Probe.Provider, s.Probe.Name)
	}
	l, err := writeTable(&b, pkg, table, laid, true, func(i int) string { return fmt.Sprintf("%s+%d", sites, sc.size*i) })
	if err != nil {
		return nil, probetable.Layout{}, err
	}
	return b.Bytes(), l, nil
}
