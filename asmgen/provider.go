package asmgen

import (
	"bytes"
	"fmt"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/ringlayout"
)

// ProviderProbe is a usdtgen probe that writes to the ring: its fire
// function calls Symbol, declared in Go as
//
//	func(_ uintptr, a1 T1, ..., aN TN)
//
// with the parameters of the probe's stub, just before the stub. While a
// ring tracer records, the trampoline has the writer take the words where
// the register ABI put them: the unused first in AX, so that they are
// where an automatic probe's are.
type ProviderProbe struct {
	Symbol string
	// Words is how many arguments follow the unused first, at most
	// ProviderWords, and Strings which of them (a bit each) point to a C
	// string.
	Words   int
	Strings uint64
}

// ProviderWords is how many words a usdtgen probe may give the ring, as
// many as a probe has. On amd64 the register ABI passes eight after the
// unused first, and the writer takes the rest from the caller's stack as
// whole words: the trampoline's parameters past ProviderRegWords must be
// 64 bits each, where the ABI would pack smaller ones. On arm64 all are
// in registers, the twelfth in R12, which the trampoline moves to R15,
// where the writer saves it after R11.
const ProviderWords = probe.MaxArgs

// ProviderRegWords is how many of a usdtgen probe's words every
// architecture with a ring passes in registers.
const ProviderRegWords = 8

// Plan9Provider writes the trampolines of a package's usdtgen probes.
// list is the symbol of what the tracer finds them by, which Go declares
// as a variable: ringlayout.ProviderMagic, their count, then each probe's
// semaphore, in the order of probes; a probe's records name its
// semaphore's address. With defineRing it also declares the ring and its
// writer, for a package whose other assembly does not.
func Plan9Provider(arch Arch, header, list string, rt Runtime, probes []ProviderProbe, defineRing bool) ([]byte, error) {
	if !rt.WithRing(arch) {
		return nil, fmt.Errorf("asmgen: no in-process ring for GOARCH=%s", arch)
	}
	listName, err := asmName(list)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(header)
	if defineRing {
		ringDecl(&b)
	}
	for i, p := range probes {
		if p.Words > ProviderWords {
			return nil, fmt.Errorf("asmgen: %s takes %d words, more than the ring's %d", p.Symbol, p.Words, ProviderWords)
		}
		name, err := asmName(p.Symbol)
		if err != nil {
			return nil, err
		}
		if arch == ARM64 {
			// A frame keeps the link register across the BL.
			fmt.Fprintf(&b, "\nTEXT %s<ABIInternal>(SB), %d, $0\n", name, flagNOSPLIT)
			if p.Words > 11 {
				b.WriteString("\tMOVD R12, R15\n")
			}
			fmt.Fprintf(&b, "\tMOVD %s(SB), R12\n\tCMP $%d, R12\n\tBNE off\n", ringSym(), ringlayout.Recording)
			fmt.Fprintf(&b, "\tMOVD $%d, R12\n\tMOVD %s+%d(SB), R13\n\tMOVD ZR, R14\n", uint64(p.Words)|p.Strings<<8, listName, 16+8*i)
			fmt.Fprintf(&b, "\tBL %s<ABIInternal>(SB)\noff:\n\tRET\n", recordSym())
			continue
		}
		fmt.Fprintf(&b, "\nTEXT %s<ABIInternal>(SB), %d, $0\n", name, flagNOSPLIT|flagNOFRAME)
		fmt.Fprintf(&b, "\tCMPQ %s(SB), $%d\n\tJNE off\n", ringSym(), ringlayout.Recording)
		fmt.Fprintf(&b, "\tMOVQ $%d, R12\n\tMOVQ %s+%d(SB), R13\n\tXORL DX, DX\n", uint64(p.Words)|p.Strings<<8, listName, 16+8*i)
		fmt.Fprintf(&b, "\tCALL %s<ABIInternal>(SB)\noff:\n\tRET\n", recordSym())
	}
	if defineRing {
		recordFunc(&b, arch, rt)
	}
	return b.Bytes(), nil
}
