package asmgen

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

func TestPlan9Sites(t *testing.T) {
	tramps := []Trampoline{{Symbol: "tr0", Args: 1}}
	p := func(name string, kinds ...probe.Kind) probe.Probe {
		pr := probe.Probe{Provider: "p", Name: name}
		for _, k := range kinds {
			pr.Args = append(pr.Args, probe.Arg{Kind: k})
		}
		return pr
	}
	tests := []struct {
		name  string
		arch  Arch
		sites []Site
		want  []string // lines the file must contain
		err   string
		// tramps replaces the one trampoline, of an int64 and a string.
		tramps []Trampoline
	}{
		{"amd64", AMD64, []Site{{Probe: p("a", probe.Int64, probe.String)}, {Probe: p("b", probe.Int64, probe.String)}}, []string{
			"TEXT ·tr0(SB), 516, $0-16\n", // the site index, then the arguments after the goroutine id
			"\tLEAQ (R13)(R12*8), R13\n",
			"\tBYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00; BYTE $0xc3; BYTE $0xcc; BYTE $0xcc // p:a\n",
			"DATA ·tab+0(SB)/8, $0x046f67544453557f\n", // version 4: the sites back to back
			"DATA ·tab+32(SB)/8, $·sites+0(SB)\n",      // the first site's address, alone
		}, "", nil},
		{"arm64", ARM64, []Site{{Probe: p("a", probe.Int64, probe.String)}, {Probe: p("b", probe.Int64, probe.String)}}, []string{
			"\tADD R10<<3, R11, R11\n",
			"DATA ·tab+32(SB)/8, $·sites+0(SB)\n",
		}, "", nil},
		{"arguments differ", AMD64, []Site{{Probe: p("a", probe.Int64)}}, nil, "p:a does not match its trampoline", nil},
		{"no goroutine id", AMD64, []Site{{Probe: p("a", probe.String, probe.Int64)}}, nil, "p:a does not match its trampoline", nil},
		{"too many arguments", AMD64, nil, nil, "at most 12 fit in registers", []Trampoline{{Symbol: "tr0", Args: probe.MaxArgs}}},
		{"no trampoline", AMD64, []Site{{Probe: p("a", probe.Int64, probe.String), Trampoline: 1}}, nil, "p:a does not match its trampoline", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tramps := tramps
			if tt.tramps != nil {
				tramps = tt.tramps
			}
			src, l, err := Plan9Sites(tt.arch, "", "pkg", "tab", "sites", 152, tramps, tt.sites)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Count != len(tt.sites) {
				t.Errorf("layout counts %d probes, want %d", l.Count, len(tt.sites))
			}
			for _, w := range tt.want {
				if !strings.Contains(string(src), w) {
					t.Errorf("no %q in\n%s", w, src)
				}
			}
			if strings.Contains(string(src), "$·sites+8(SB)") {
				t.Errorf("the table holds the second site's address too:\n%s", src)
			}
		})
	}
}

// TestTrampoline checks what a trampoline loads, for the most arguments
// a note has room for and for none.
func TestTrampoline(t *testing.T) {
	tests := []struct {
		name string
		arch Arch
		args int
		code string
	}{
		{"amd64", AMD64, 4, `
TEXT ·tr(SB), 516, $0-40
	MOVQ site+0(FP), R12
	LEAQ ·sites(SB), R13
	LEAQ (R13)(R12*8), R13
	MOVQ 152(R14), R14
	MOVQ a1+8(FP), AX
	MOVQ a2+16(FP), BX
	MOVQ a3+24(FP), CX
	MOVQ a4+32(FP), DX
	JMP R13
`},
		{"arm64", ARM64, 4, `
TEXT ·tr(SB), 516, $0-40
	MOVD site+0(FP), R10
	MOVD $·sites(SB), R11
	ADD R10<<3, R11, R11
	MOVD 152(g), R12
	MOVD a1+8(FP), R0
	MOVD a2+16(FP), R1
	MOVD a3+24(FP), R2
	MOVD a4+32(FP), R3
	JMP (R11)
`},
		{"amd64 none", AMD64, 0, `
TEXT ·tr(SB), 516, $0-8
	MOVQ site+0(FP), R12
	LEAQ ·sites(SB), R13
	LEAQ (R13)(R12*8), R13
	MOVQ 152(R14), R14
	JMP R13
`},
		{"amd64 widest", AMD64, probe.MaxArgs - 1, "\tMOVQ a11+88(FP), R12\n\tJMP R13\n"},
		{"arm64 widest", ARM64, probe.MaxArgs - 1, "\tMOVD a11+88(FP), R10\n\tJMP (R11)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			trampoline(&b, tt.arch, Trampoline{Symbol: "tr", Args: tt.args}, "sites", 152)
			if !strings.HasSuffix(b.String(), tt.code) {
				t.Errorf("code:\n%s\nwant it to end in:\n%s", b.String(), tt.code)
			}
		})
	}
}

// TestRegisterSpecs checks how a note names what a trampoline loaded, for
// arguments of every width and signedness, the widest signature included:
// the register, with the size and sign of the argument's kind.
func TestRegisterSpecs(t *testing.T) {
	mixed := []probe.Kind{probe.Int64, probe.Bool, probe.Int16, probe.Uint32, probe.String, probe.Int8}
	widest := slices.Repeat([]probe.Kind{probe.Uint64}, probe.MaxArgs)
	widest[0] = probe.Int64
	tests := []struct {
		name  string
		arch  Arch
		kinds []probe.Kind
		specs string
	}{
		{"amd64", AMD64, mixed, "-8@%r14 1@%rax -2@%rbx 4@%rcx 8@%rdx -1@%rsi"},
		{"arm64", ARM64, mixed, "-8@x12 1@x0 -2@x1 4@x2 8@x3 -1@x4"},
		{"amd64 widest", AMD64, widest, "-8@%r14 8@%rax 8@%rbx 8@%rcx 8@%rdx 8@%rsi 8@%rdi 8@%r8 8@%r9 8@%r10 8@%r11 8@%r12"},
		{"arm64 widest", ARM64, widest, "-8@x12 8@x0 8@x1 8@x2 8@x3 8@x4 8@x5 8@x6 8@x7 8@x8 8@x9 8@x10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if specs := registerSpecs(tt.arch, tt.kinds); specs != tt.specs {
				t.Errorf("specs %q, want %q", specs, tt.specs)
			}
		})
	}
}
