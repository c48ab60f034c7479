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
//	func Symbol(site int, args...)
//
// with args of Kinds[1:], and calls it with the index of the probe's site;
// it jumps to that site without touching the stack, so at the site's NOP
// the arguments sit where the trampoline received them and every probe of
// a trampoline shares its argument specs.
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

// gField is the operand of the word at off in runtime.g, as a tracer reads
// it at a site. Go code keeps g in a register: R14 in ABIInternal code on
// amd64, whose calls into ABI0 assembly leave it alone (they restore it
// after the call, for ABI0 code may clobber it), and R28 in every ABI on
// arm64.
func gField(arch Arch, off int64) string {
	if arch == ARM64 {
		return fmt.Sprintf("[x28, %d]", off)
	}
	return fmt.Sprintf("%d(%%r14)", off)
}

// jump is a trampoline's body: the address of site index, sites plus index
// times the site size, and a jump there. Only scratch registers change.
var jump = map[Arch]string{
	AMD64: "\tMOVQ site+0(FP), AX\n\tLEAQ ·%[1]s(SB), CX\n\tLEAQ (CX)(AX*8), CX\n\tJMP CX\n",
	ARM64: "\tMOVD site+0(FP), R0\n\tMOVD $·%[1]s(SB), R1\n\tADD R0<<3, R1, R1\n\tJMP (R1)\n",
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
		// The site index, then the arguments after the goroutine id.
		f := GoArgs(arch, append([]probe.Kind{probe.Int64}, t.Kinds[1:]...))
		specs[i] = strings.Join(append([]string{spec(probe.Int64, gField(arch, goidOffset))}, f.Specs[1:]...), " ")
		fmt.Fprintf(&b, "\nTEXT ·%s(SB), %d, $0-%d\n", t.Symbol, flagNOSPLIT|flagNOFRAME, f.Size)
		fmt.Fprintf(&b, jump[arch], sites)
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
