package asmgen

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
)

// Trampoline is the one assembly entry point of every probe whose arguments
// have the same kinds. Kinds[0] is the running goroutine's id, which the
// trampoline is not passed: Go declares it as
//
//	func Symbol(site int, a1 K1, a2 K2, ...)
//
// with the kinds Kinds[1:], and calls it with the index of the probe's
// site. It loads the goroutine id and the arguments into registers and
// jumps to that site, so every probe of a trampoline shares its argument
// specs. Registers make the specs short ("8@%rbx", not "8@24(%rsp)"), and
// a tracer reads them from the saved registers instead of copying from
// the stack for every argument.
type Trampoline struct {
	Symbol string
	Kinds  []probe.Kind
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

// loads are the instructions that load an ABI0 argument of each size,
// extended to 64 bits, signed and unsigned.
var loads = map[Arch]map[int][2]string{
	AMD64: {1: {"MOVBQSX", "MOVBQZX"}, 2: {"MOVWQSX", "MOVWQZX"}, 4: {"MOVLQSX", "MOVL"}, 8: {"MOVQ", "MOVQ"}},
	ARM64: {1: {"MOVB", "MOVBU"}, 2: {"MOVH", "MOVHU"}, 4: {"MOVW", "MOVWU"}, 8: {"MOVD", "MOVD"}},
}

// trampoline writes t, which loads the goroutine id from runtime.g at
// goidOffset and the arguments, then jumps to site number site+0(FP) of
// sites. It returns the argument specs at the site.
func trampoline(b *bytes.Buffer, arch Arch, t Trampoline, sites string, goidOffset int64) (argSpecs string) {
	regs := trampolineRegs[arch]
	// The site index, then the arguments after the goroutine id.
	f := GoArgs(arch, append([]probe.Kind{probe.Int64}, t.Kinds[1:]...))
	fmt.Fprintf(b, "\nTEXT ·%s(SB), %d, $0-%d\n", t.Symbol, flagNOSPLIT|flagNOFRAME, f.Size)
	target, scratch := regs[len(regs)-1], regs[len(regs)-2]
	// The site's address first: its registers may carry arguments after.
	if arch == ARM64 {
		fmt.Fprintf(b, "\tMOVD site+0(FP), %[1]s\n\tMOVD $·%[3]s(SB), %[2]s\n\tADD %[1]s<<3, %[2]s, %[2]s\n", scratch, target, sites)
		fmt.Fprintf(b, "\tMOVD %d(g), %s\n", goidOffset, regs[0])
	} else {
		fmt.Fprintf(b, "\tMOVQ site+0(FP), %[1]s\n\tLEAQ ·%[3]s(SB), %[2]s\n\tLEAQ (%[2]s)(%[1]s*8), %[2]s\n", scratch, target, sites)
		fmt.Fprintf(b, "\tMOVQ %d(R14), R14\n", goidOffset)
	}
	specs := []string{spec(probe.Int64, noteReg(arch, regs[0]))}
	for i, k := range t.Kinds[1:] {
		load := loads[arch][k.Size()][1]
		if k.Signed() {
			load = loads[arch][k.Size()][0]
		}
		fmt.Fprintf(b, "\t%s a%d+%d(FP), %s\n", load, i+1, f.Offsets[i+1], regs[i+1])
		specs = append(specs, spec(k, noteReg(arch, regs[i+1])))
	}
	fmt.Fprintf(b, jump[arch], target)
	return strings.Join(specs, " ")
}

// jump is a trampoline's last instruction.
var jump = map[Arch]string{
	AMD64: "\tJMP %s\n",
	ARM64: "\tJMP (%s)\n",
}

// Plan9Sites is Plan9 for packages with many probes: instead of one stub
// function per probe it writes one function, sites, holding every probe's
// site back to back, and one trampoline per distinct argument signature, so
// the Go code that fires probes can be shared between probes too. The table
// is laid out as Plan9 lays it out, with each stub address pointing into
// sites. goidOffset is where runtime.g holds the goroutine id.
func Plan9Sites(arch Arch, header, pkg, table, sites string, goidOffset int64, tramps []Trampoline, probes []Site) ([]byte, probetable.Layout, error) {
	sc, ok := siteCode[arch]
	if !ok {
		return nil, probetable.Layout{}, fmt.Errorf("asmgen: no probe sites for GOARCH=%s", arch)
	}
	var b bytes.Buffer
	b.WriteString(header)
	specs := make([]string, len(tramps))
	for i, t := range tramps {
		if len(t.Kinds) == 0 || t.Kinds[0] != probe.Int64 {
			return nil, probetable.Layout{}, fmt.Errorf("asmgen: trampoline %s does not start with the goroutine id", t.Symbol)
		}
		if len(t.Kinds) > len(trampolineRegs[arch])-1 {
			return nil, probetable.Layout{}, fmt.Errorf("asmgen: trampoline %s has %d arguments, at most %d fit in registers", t.Symbol, len(t.Kinds), len(trampolineRegs[arch])-1)
		}
		specs[i] = trampoline(&b, arch, t, sites, goidOffset)
	}
	laid := make([]probe.Probe, len(probes))
	for i, s := range probes {
		if s.Trampoline < 0 || s.Trampoline >= len(tramps) || !slices.Equal(s.Probe.Kinds(), tramps[s.Trampoline].Kinds) {
			return nil, probetable.Layout{}, fmt.Errorf("asmgen: probe %s:%s does not match its trampoline", s.Probe.Provider, s.Probe.Name)
		}
		laid[i] = s.Probe
		laid[i].Spec = specs[s.Trampoline]
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
