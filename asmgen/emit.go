package asmgen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/probetable"
)

// Stub names the symbols behind one probe.
type Stub struct {
	Probe probe.Probe
	// Symbol is the stub function: a Go identifier for Plan9 stubs, a C
	// symbol for GNU ones.
	Symbol string
	// Semaphore is the C symbol of the semaphore (GNU files only; Plan9
	// semaphores live in the probe table).
	Semaphore string
}

// nop is the probe site. Go's NOP pseudo-instruction assembles to nothing,
// so the instruction is spelled out. On amd64 it is the pair upstream's
// usdt.h emits: the 1-byte NOP (90), where the note points, then the 5-byte
// NOP (0f 1f 44 00 00). Every kernel emulates a uprobe on the 1-byte NOP,
// one trap per fire, where it would single-step a 5-byte one out of line,
// a second trap (8x to 19x the cost before Linux 6.18). A tracer that knows
// the kernel optimizes uprobes (6.18 and later) attaches at the 5-byte NOP
// instead, note address + 1, which becomes a call to a trampoline after the
// first hit, several times cheaper than any trap. That call pushes a return
// address below SP, which is safe here because every site starts a stub a
// Go function called: nothing below SP is live, unlike in a C function with
// a red zone.
var nop = map[Arch]string{
	AMD64: "BYTE $0x90; BYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00",
	ARM64: "WORD $0xd503201f",
}

// gnuNop is nop for the GNU assembler.
var gnuNop = map[Arch]string{
	AMD64: ".byte 0x90, 0x0f, 0x1f, 0x44, 0x00, 0x00",
	ARM64: "nop",
}

// Plan9 flag values from textflag.h, written as numbers so that files
// assembled outside `go build` need no include path.
const (
	flagNOSPLIT = 4
	flagNOPTR   = 16
	flagNOFRAME = 512
)

// Plan9 returns a Go assembly file with one stub per probe and the probe
// table symbol, and the table's layout, which the Go declaration of table
// must match. header goes first (build constraints, generated-code notice).
func Plan9(arch Arch, header, pkg, table string, stubs []Stub) ([]byte, probetable.Layout, error) {
	var b bytes.Buffer
	b.WriteString(header)
	probes := make([]probe.Probe, len(stubs))
	for i, s := range stubs {
		f := GoArgs(arch, s.Probe.Kinds())
		probes[i] = s.Probe
		probes[i].Spec, probes[i].Slot = strings.Join(f.Specs, " "), i
		fmt.Fprintf(&b, "\n// %s:%s\nTEXT ·%s(SB), %d, $0-%d\n\t%s\n\tRET\n",
			s.Probe.Provider, s.Probe.Name, s.Symbol, flagNOSPLIT|flagNOFRAME, f.Size, nop[arch])
	}
	l, err := writeTable(&b, pkg, "·"+table, probes, false, func(i int) string { return "·" + stubs[i].Symbol })
	if err != nil {
		return nil, probetable.Layout{}, err
	}
	return b.Bytes(), l, nil
}

// writeTable writes the DATA and GLOBL directives of the probe table of
// probes, the address of probe i's site being symbol(i) (a symbol, plus an
// offset if need be), which the linker relocates. backToBack says the
// sites follow each other probetable.SiteSize bytes apart: the table then
// holds symbol(0) only.
func writeTable(b *bytes.Buffer, pkg, table string, probes []probe.Probe, backToBack bool, symbol func(i int) string) (probetable.Layout, error) {
	img, err := probetable.Build(pkg, probes, backToBack)
	if err != nil {
		return probetable.Layout{}, err
	}
	l := img.Layout
	fmt.Fprintf(b, "\n// The probe table: semaphores, stub addresses and names, read by usdt-toolexec at link time.\n")
	tableWords(img, l.Size, func(off, stub int) {
		fmt.Fprintf(b, "DATA %s+%d(SB)/8, $%s(SB)\n", table, off, symbol(stub))
	}, func(off int, w uint64) {
		if w != 0 {
			fmt.Fprintf(b, "DATA %s+%d(SB)/8, $%#016x\n", table, off, w)
		}
	})
	fmt.Fprintf(b, "GLOBL %s(SB), %d, $%d\n", table, flagNOPTR, l.Size)
	return l, nil
}

// tableWords calls stub for each of img's stub address words before end,
// with its offset and its probe's index, and value for each other word, with
// its offset and value: the two are what an assembler writes differently.
func tableWords(img probetable.Image, end int, stub func(off, i int), value func(off int, w uint64)) {
	l := img.Layout
	for off := 0; off < end; off += 8 {
		if off >= l.StubsOffset && off < l.SlotsOffset {
			stub(off, (off-l.StubsOffset)/8)
		} else {
			value(off, binary.LittleEndian.Uint64(img.Bytes[off:]))
		}
	}
}

// GNU returns a GNU assembler file (.S, assembled by the C toolchain in a cgo
// build) that gives each probe what sys/sdt.h gives a C probe: a nop;ret
// function (the nop being nop's), a 2-byte semaphore in .probes, a non-allocated .note.stapsdt
// entry, and the shared .stapsdt.base byte. The C linker keeps all of these.
//
// It also writes the probes' table into the non-allocated section
// probetable.NamesSection, for the argument kinds and names a note cannot
// carry: without them a tracer cannot tell a string from an integer. Only
// its site addresses, which the linker resolves as it does the notes', and
// its strings are read; the notes give the semaphores, so the table's one
// slot stays unused.
func GNU(arch Arch, header string, stubs []Stub) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	// arm64's gas treats '@' as a comment, so section types use '%'.
	fmt.Fprintf(&b, `
	.pushsection .stapsdt.base, "aG", %%progbits, .stapsdt.base, comdat
	.weak _.stapsdt.base
	.hidden _.stapsdt.base
_.stapsdt.base:
	.space 1
	.size _.stapsdt.base, 1
	.popsection
`)
	for i, s := range stubs {
		fmt.Fprintf(&b, `
	/* %[1]s:%[2]s */
	.pushsection .probes, "aw", %%progbits
	.balign 2
	.globl %[3]s
	.hidden %[3]s
	.type %[3]s, %%object
	.size %[3]s, 2
%[3]s:
	.2byte 0
	.popsection

	.text
	.globl %[4]s
	.hidden %[4]s
	.type %[4]s, %%function
%[4]s:
.Lusdt_site_%[5]d:
	%[7]s
	ret
	.size %[4]s, .-%[4]s

	.pushsection .note.stapsdt, "", %%note
	.balign 4
	.4byte 8, .Lusdt_desc_end_%[5]d-.Lusdt_desc_%[5]d, 3
	.asciz "stapsdt"
.Lusdt_desc_%[5]d:
	.8byte .Lusdt_site_%[5]d, _.stapsdt.base, %[3]s
	.asciz "%[1]s"
	.asciz "%[2]s"
	.asciz "%[6]s"
.Lusdt_desc_end_%[5]d:
	.balign 4
	.popsection
`, s.Probe.Provider, s.Probe.Name, s.Semaphore, s.Symbol, i, CArgs(arch, s.Probe.Kinds()), gnuNop[arch])
	}
	probes := make([]probe.Probe, len(stubs))
	for i, s := range stubs {
		probes[i] = s.Probe
		probes[i].Spec, probes[i].Slot = CArgs(arch, s.Probe.Kinds()), 0
	}
	img, err := probetable.Build("", probes, false)
	if err != nil {
		return nil, err
	}
	l := img.Layout
	fmt.Fprintf(&b, "\n\t/* The probe table: argument kinds and names for tracers. */\n\t.pushsection %s, \"\", %%progbits\n\t.balign 8\n", probetable.NamesSection)
	tableWords(img, l.StringsOffset, func(_, stub int) {
		fmt.Fprintf(&b, "\t.8byte .Lusdt_site_%d\n", stub)
	}, func(_ int, w uint64) {
		fmt.Fprintf(&b, "\t.8byte %#016x\n", w)
	})
	// The strings end in the last one's NUL, then padding.
	all := img.Bytes[l.StringsOffset:]
	strs := all[:len(bytes.TrimRight(all, "\x00"))+1]
	for field := range bytes.SplitAfterSeq(strs, []byte{0}) {
		if len(field) > 0 {
			fmt.Fprintf(&b, "\t.ascii \"%s\"\n", gnuEscape(field))
		}
	}
	if pad := len(all) - len(strs); pad > 0 {
		fmt.Fprintf(&b, "\t.space %d\n", pad)
	}
	b.WriteString("\t.popsection\n")
	b.WriteString("\n\t.section .note.GNU-stack, \"\", %progbits\n")
	return b.Bytes(), nil
}

// gnuEscape writes b for a GNU assembler string: octal escapes, which stop
// after three digits, where a hex escape would swallow the digits after it.
func gnuEscape(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		if c >= ' ' && c <= '~' && c != '"' && c != '\\' {
			s.WriteByte(c)
		} else {
			fmt.Fprintf(&s, "\\%03o", c)
		}
	}
	return s.String()
}

// Plan9Notes writes the table of note-only probes (each with a Func, see
// probetable's version 6) as the data symbol table, and the function
// keep, which refers to it: nothing else does, and the linker keeps only
// what something reachable refers to.
func Plan9Notes(b *bytes.Buffer, arch Arch, pkg, table, keep string, probes []probe.Probe) error {
	sym, err := asmName(table)
	if err != nil {
		return err
	}
	keepSym, err := asmName(keep)
	if err != nil {
		return err
	}
	if _, err := writeTable(b, pkg, sym, probes, false, nil); err != nil {
		return err
	}
	load := map[Arch]string{AMD64: "LEAQ %s(SB), AX", ARM64: "MOVD $%s(SB), R0"}[arch]
	if load == "" {
		return fmt.Errorf("note-only probes are not supported on GOARCH=%s (amd64 and arm64 are)", arch)
	}
	fmt.Fprintf(b, "\nTEXT %s(SB), %d, $0-0\n\t%s\n\tRET\n", keepSym, flagNOSPLIT|flagNOFRAME, fmt.Sprintf(load, sym))
	return nil
}
