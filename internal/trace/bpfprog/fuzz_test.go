package bpfprog

import (
	"testing"

	"github.com/go-usdt/usdt/internal/sdtnote"
)

// FuzzParseArgs parses the argument string of a note of a binary nobody
// vouches for, as trace does before it attaches: an error or one Arg per
// operand, each 1, 2, 4 or 8 bytes wide, never a panic. The seeds are the
// argument strings of real notes, as readelf -n shows them: gcc's sys/sdt.h
// for amd64 and arm64, usdtgen's Plan9 stubs, and automatic probes.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []struct{ arch, args string }{
		{"amd64", "-4@%edi 8@%rsi"},
		{"arm64", "-4@[sp, 4] -4@[sp, 8] -4@[sp, 12]"},
		{"amd64", "-8@8(%rsp) 8@16(%rsp) 2@24(%rsp) -8@32(%rsp)"},
		{"amd64", "-8@%r13 -8@%rbx 8@%rcx 8@%rdi"},
		{"amd64", "-8@152(%r14) 8@$0 -4@$-9"},
		{"arm64", "-8@[x28, 152] 8@0 4@7 -4@x0 8@x30 8@sp"},
		{"amd64", ""},
	} {
		f.Add(seed.arch, seed.args)
	}
	f.Fuzz(func(t *testing.T, arch, args string) {
		specs, err := ParseArgs(arch, args)
		if err != nil {
			return
		}
		if n := len(sdtnote.SplitArgs(args)); len(specs) != n {
			t.Errorf("ParseArgs(%s, %q) gives %d arguments of %d operands", arch, args, len(specs), n)
		}
		for _, a := range specs {
			if a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
				t.Errorf("ParseArgs(%s, %q) gives an argument of %d bytes", arch, args, a.Size)
			}
		}
	})
}
