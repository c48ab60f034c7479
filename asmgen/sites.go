package asmgen

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
)

// Symbols names what Plan9Sites defines for a package, in Go's notation
// ("usdt/parser_1f2e3d4c.sites"): names outside the package, because only
// the runtime's packages may define register-ABI (ABIInternal) assembly,
// and the assembler decides that by the package path it is given (-p).
// Assembled under such a path, the file names every symbol in full; the
// package's Go code reaches them by //go:linkname.
type Symbols struct {
	// Trampolines are the entry points of the probes, all the same code:
	// Go declares each once, for one number of arguments, as
	//
	//	func fire(site int, a1 W1, a2 W2, ...)
	//
	// where each W is a 64-bit integer or a pointer, and calls it with the
	// index of the probe's site. (The compiler fails on two declarations
	// of one symbol, hence one trampoline per declaration.)
	Trampolines []string
	// Sites holds the probe sites, back to back.
	Sites string
	// Table is the probe table, which Go declares as a variable too.
	Table string
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
// numbers.
func trampoline(b *bytes.Buffer, arch Arch, name, sites string, goidOffset int64) {
	a := abis[arch]
	fmt.Fprintf(b, "\nTEXT %s<ABIInternal>(SB), %d, $0\n", name, flagNOSPLIT|flagNOFRAME)
	if arch == ARM64 {
		fmt.Fprintf(b, "\tMOVD $%[3]s(SB), %[2]s\n\tADD %[1]s<<3, %[2]s, %[2]s\n\tMOVD %[4]d(g), %[5]s\n\tJMP (%[2]s)\n", a.site, a.target, sites, goidOffset, a.goid)
		return
	}
	fmt.Fprintf(b, "\tLEAQ %[3]s(SB), %[2]s\n\tLEAQ (%[2]s)(%[1]s*8), %[2]s\n\tMOVQ %[4]d(R14), %[5]s\n\tJMP %[2]s\n", a.site, a.target, sites, goidOffset, a.goid)
}

// Plan9Sites is Plan9 for packages with many probes: instead of one stub
// function per probe it writes one function holding every probe's site
// back to back, and trampolines that jump to them, so the Go code that
// fires probes can be shared between probes too. The table is laid out as Plan9 lays it
// out, with each stub address pointing into the sites. goidOffset is where
// runtime.g holds the goroutine id. Each probe's first argument is the
// goroutine id.
func Plan9Sites(arch Arch, header, pkg string, syms Symbols, goidOffset int64, probes []probe.Probe) ([]byte, probetable.Layout, error) {
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
	for _, t := range syms.Trampolines {
		tramp, err := asmName(t)
		if err != nil {
			return nil, probetable.Layout{}, err
		}
		trampoline(&b, arch, tramp, sites, goidOffset)
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
	fmt.Fprintf(&b, "\n// The probe sites, %d bytes each: the Go linker keeps a function whole.\nTEXT %s(SB), %d, $0-0\n", sc.size, sites, flagNOSPLIT|flagNOFRAME)
	for _, p := range probes {
		fmt.Fprintf(&b, "\t%s // %s:%s\n", sc.code, p.Provider, p.Name)
	}
	l, err := writeTable(&b, pkg, table, laid, true, func(i int) string { return fmt.Sprintf("%s+%d", sites, sc.size*i) })
	if err != nil {
		return nil, probetable.Layout{}, err
	}
	return b.Bytes(), l, nil
}
