package asmgen

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/goidoff"
	"github.com/go-usdt/usdt/internal/probe"
)

var backToBack = regexp.MustCompile(`(?m)^DATA usdt∕p_1·tab\+0\(SB\)/8, \$0x2[45]6f67544453557f$`)

func TestPlan9Sites(t *testing.T) {
	syms := Symbols{Trampolines: []Trampoline{{Symbol: "usdt/p_1.tr0"}, {Symbol: "usdt/p_1.tr1", Clock: ClockSince}, {Symbol: "usdt/p_1.tr2", Clock: ClockNow}},
		Sites: "usdt/p_1.sites", Table: "usdt/p_1.tab", Since: "usdt/p_1.since"}
	p := func(name string, kinds ...probe.Kind) probe.Probe {
		pr := probe.Probe{Provider: "p", Name: name}
		for _, k := range kinds {
			pr.Args = append(pr.Args, probe.Arg{Kind: k})
		}
		return pr
	}
	tests := []struct {
		name   string
		arch   Arch
		probes []probe.Probe
		want   []string // lines the file must contain
		err    string
		syms   *Symbols // replaces syms
		rt     Runtime
	}{
		{"amd64", AMD64, []probe.Probe{p("a", probe.Int64, probe.String), p("b", probe.Int64, probe.String)}, []string{
			"TEXT usdt∕p_1·tr0<ABIInternal>(SB), 516, $0\n",
			"TEXT usdt∕p_1·tr1<ABIInternal>(SB), 516, $0\n\tJMP usdt∕p_1·since<ABIInternal>(SB)\n",
			"TEXT usdt∕p_1·tr2<ABIInternal>(SB), 4, $0\n",
			"TEXT usdt∕p_1·since<ABIInternal>(SB), 4, $80\n",
			"\tLEAQ (R12)(AX*8), R12\n",
			"TEXT usdt∕p_1·sites(SB), 516, $0-0\n",
			"// 1: p:b\nTEXT usdt∕p_1·sites(SB), 516, $0-0\n\tBYTE $0x90; BYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00; BYTE $0xc3; BYTE $0xcc; BYTE $0x90; ",
			"DATA usdt∕p_1·tab+32(SB)/8, $usdt∕p_1·sites+0(SB)\n", // the first site's address, alone
			"GLOBL usdt∕p_1·tab(SB), 16, $",
		}, "", nil, Runtime{Goid: 152}},
		{"amd64 ring", AMD64, []probe.Probe{p("a", probe.Int64, probe.Int64)}, []string{
			"GLOBL usdt∕ring·ctl(SB), 18, $",
			// Each trampoline tests the ring before its site.
			"TEXT usdt∕p_1·tr0<ABIInternal>(SB), 516, $0\n\tCMPQ usdt∕ring·ctl(SB), $1\n\tJNE fire\n\tMOVQ $2, R12\n\tLEAQ usdt∕p_1·sites(SB), R13\n\tLEAQ (R13)(AX*8), R13\n\tXORL DX, DX\n\tCALL usdt∕ring·record<ABIInternal>(SB)\nfire:\n",
			"TEXT usdt∕p_1·tr1<ABIInternal>(SB), 516, $0\n\tMOVQ $1, R12\n\tJMP usdt∕p_1·since<ABIInternal>(SB)\n",
			"TEXT usdt∕p_1·tr2<ABIInternal>(SB), 4, $0\n\tCMPQ usdt∕ring·ctl(SB), $1\n\tJEQ ring\n",
			"TEXT usdt∕p_1·since<ABIInternal>(SB), 4, $88\n",
			"TEXT usdt∕ring·record<ABIInternal>(SB), 6, $224\n",
			// The P's id, through g.m and m.p.
			"\tMOVQ 48(R14), R13\n\tMOVQ 200(R13), R13\n\tTESTQ R13, R13\n\tJEQ done\n\tMOVLQZX 0(R13), R13\n",
		}, "", &Symbols{Trampolines: []Trampoline{{Symbol: "usdt/p_1.tr0", Words: 2}, {Symbol: "usdt/p_1.tr1", Clock: ClockSince, Words: 1}, {Symbol: "usdt/p_1.tr2", Clock: ClockNow, Words: 3}},
			Sites: "usdt/p_1.sites", Table: "usdt/p_1.tab", Since: "usdt/p_1.since"}, Runtime{Goid: 152, P: &goidoff.P{GM: 48, MP: 200}}},
		{"arm64 ring", ARM64, []probe.Probe{p("a", probe.Int64, probe.Int64)}, []string{
			"GLOBL usdt∕ring·ctl(SB), 18, $",
			// The trampoline keeps its link register in a frame of its
			// own across the call of record, for tracebacks.
			"TEXT usdt∕p_1·tr0<ABIInternal>(SB), 516, $0\n\tMOVD usdt∕ring·ctl(SB), R12\n\tCMP $1, R12\n\tBNE fire\n\tSUB $16, RSP\n\tMOVD R30, (RSP)\n\tMOVD $2, R12\n\tMOVD $usdt∕p_1·sites(SB), R13\n\tADD R0<<3, R13, R13\n\tMOVD ZR, R14\n\tBL usdt∕ring·record<ABIInternal>(SB)\n\tMOVD (RSP), R30\n\tADD $16, RSP\nfire:\n",
			"TEXT usdt∕p_1·tr1<ABIInternal>(SB), 516, $0\n\tMOVD $1, R12\n\tJMP usdt∕p_1·since<ABIInternal>(SB)\n",
			"TEXT usdt∕ring·record<ABIInternal>(SB), 6, $",
			// The P's id, through g.m and m.p.
			"\tMOVD 48(g), R20\n\tMOVD 200(R20), R20\n\tCBZ R20, done\n\tMOVWU 0(R20), R20\n",
			// The head, published after the record.
			"publish:\n\tADD $0, R21, R0\n\tSTLR R22, (R0)\n",
		}, "", &Symbols{Trampolines: []Trampoline{{Symbol: "usdt/p_1.tr0", Words: 2}, {Symbol: "usdt/p_1.tr1", Clock: ClockSince, Words: 1}, {Symbol: "usdt/p_1.tr2", Clock: ClockNow, Words: 3}},
			Sites: "usdt/p_1.sites", Table: "usdt/p_1.tab", Since: "usdt/p_1.since"}, Runtime{Goid: 152, P: &goidoff.P{GM: 48, MP: 200}}},
		{"arm64 without the ring", ARM64, []probe.Probe{p("a", probe.Int64)}, []string{"TEXT usdt∕p_1·tr0<ABIInternal>(SB), 516, $0\n\tMOVD $usdt∕p_1·sites(SB), R12\n"}, "",
			nil, Runtime{Goid: 152}},
		{"arm64", ARM64, []probe.Probe{p("a", probe.Int64, probe.String), p("b", probe.Int64, probe.String)}, []string{
			"\tADD R0<<3, R12, R12\n",
			"DATA usdt∕p_1·tab+32(SB)/8, $usdt∕p_1·sites+0(SB)\n",
		}, "", nil, Runtime{Goid: 152}},
		{"no goroutine id", AMD64, []probe.Probe{p("a", probe.String, probe.Int64)}, nil, "p:a needs the goroutine id first", nil, Runtime{}},
		{"too many arguments", AMD64, []probe.Probe{p("a", slices.Repeat([]probe.Kind{probe.Int64}, probe.MaxArgs+1)...)}, nil, "at most 12 arguments", nil, Runtime{}},
		{"unspellable", AMD64, nil, nil, `"usdt/go-x.sites" has '-'`, &Symbols{Sites: "usdt/go-x.sites", Table: "t", Since: "s"}, Runtime{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			syms := syms
			if tt.syms != nil {
				syms = *tt.syms
			}
			src, l, err := Plan9Sites(tt.arch, "", "pkg", syms, tt.rt, tt.probes)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Count != len(tt.probes) {
				t.Errorf("layout counts %d probes, want %d", l.Count, len(tt.probes))
			}
			for _, w := range tt.want {
				if !strings.Contains(string(src), w) {
					t.Errorf("no %q in\n%s", w, src)
				}
			}
			// Version 4 or 5 with 32-bit semaphore slots
			// (probetable.WideFlag): the sites back to back, their strings as
			// they are or deflated, whichever the running Go release's
			// compress/flate makes smaller (Go 1.27 deflates these few
			// into less than they are, Go 1.26 not).
			if !backToBack.Match(src) {
				t.Errorf("the table is not one of sites back to back:\n%s", src)
			}
			if strings.Contains(string(src), "sites+8(SB)") {
				t.Errorf("the table holds the second site's address too:\n%s", src)
			}
		})
	}
}

// The trampolines without the ring.
func plain(b *bytes.Buffer, arch Arch, name, sites string, goid int64) {
	trampoline(b, arch, name, sites, goid, "", 0, 0)
}

func nowNoRing(b *bytes.Buffer, arch Arch, name, sites string, goid int64) {
	now(b, arch, name, sites, goid, "", 0)
}

func sinceNoRing(b *bytes.Buffer, arch Arch, name, sites string, goid int64) {
	since(b, arch, name, sites, Runtime{Goid: goid}, "")
}

// TestTrampolines checks the trampolines' code: the arguments stay where
// the caller's register ABI put them; those that read the clock keep them
// across its call, in a frame, and call the site from it.
func TestTrampolines(t *testing.T) {
	tests := []struct {
		name string
		arch Arch
		emit func(*bytes.Buffer, Arch, string, string, int64)
		code string
	}{
		{"amd64", AMD64, plain, `
TEXT tr<ABIInternal>(SB), 516, $0
	LEAQ sites(SB), R12
	LEAQ (R12)(AX*8), R12
	MOVQ 152(R14), R13
	JMP R12
`},
		{"arm64", ARM64, plain, `
TEXT tr<ABIInternal>(SB), 516, $0
	MOVD $sites(SB), R12
	ADD R0<<3, R12, R12
	MOVD 152(g), R13
	JMP (R12)
`},
		{"amd64 now", AMD64, nowNoRing, `
TEXT tr<ABIInternal>(SB), 4, $0
	LEAQ sites(SB), R12
	LEAQ (R12)(AX*8), R12
	MOVQ 152(R14), R13
	CALL R12
	CALL runtime·nanotime<ABIInternal>(SB)
	RET
`},
		{"amd64 since", AMD64, sinceNoRing, `
TEXT tr<ABIInternal>(SB), 4, $80
	MOVQ AX, 8(SP)
	MOVQ BX, 16(SP)
	MOVQ CX, 24(SP)
	MOVQ DI, 32(SP)
	MOVQ SI, 40(SP)
	MOVQ R8, 48(SP)
	MOVQ R9, 56(SP)
	MOVQ R10, 64(SP)
	MOVQ R11, 72(SP)
	CALL runtime·nanotime<ABIInternal>(SB)
	SUBQ 16(SP), AX
	MOVQ AX, BX
	MOVQ 24(SP), CX
	MOVQ 32(SP), DI
	MOVQ 40(SP), SI
	MOVQ 48(SP), R8
	MOVQ 56(SP), R9
	MOVQ 64(SP), R10
	MOVQ 72(SP), R11
	MOVQ 8(SP), AX
	MOVQ $0x48871dba0c14d0e7, R12
	MOVQ R12, 0(SP)
	LEAQ sites(SB), R12
	LEAQ (R12)(AX*8), R12
	MOVQ 152(R14), R13
	CALL R12
	MOVQ $0, 0(SP)
	RET
`},
		{"arm64 since", ARM64, sinceNoRing, `
TEXT tr<ABIInternal>(SB), 4, $88
	MOVD R0, 16(RSP)
	MOVD R1, 24(RSP)
	MOVD R2, 32(RSP)
	MOVD R3, 40(RSP)
	MOVD R4, 48(RSP)
	MOVD R5, 56(RSP)
	MOVD R6, 64(RSP)
	MOVD R7, 72(RSP)
	MOVD R8, 80(RSP)
	CALL runtime·nanotime<ABIInternal>(SB)
	MOVD 24(RSP), R1
	SUB R1, R0, R1
	MOVD 32(RSP), R2
	MOVD 40(RSP), R3
	MOVD 48(RSP), R4
	MOVD 56(RSP), R5
	MOVD 64(RSP), R6
	MOVD 72(RSP), R7
	MOVD 80(RSP), R8
	MOVD 16(RSP), R0
	MOVD $0x48871dba0c14d0e7, R12
	MOVD R12, 8(RSP)
	MOVD $sites(SB), R12
	ADD R0<<3, R12, R12
	MOVD 152(g), R13
	CALL (R12)
	MOVD ZR, 8(RSP)
	RET
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			tt.emit(&b, tt.arch, "tr", "sites", 152)
			if b.String() != tt.code {
				t.Errorf("code:\n%s\nwant:\n%s", b.String(), tt.code)
			}
		})
	}
}

// TestArgSpecs checks how a note names where a site finds its arguments,
// for arguments of every width and signedness, the widest signature
// included: the register or stack slot, with the size and sign of the
// argument's kind.
func TestArgSpecs(t *testing.T) {
	mixed := []probe.Kind{probe.Int64, probe.Bool, probe.Int16, probe.Uint32, probe.String, probe.Int8}
	widest := slices.Repeat([]probe.Kind{probe.Uint64}, probe.MaxArgs)
	widest[0] = probe.Int64
	tests := []struct {
		name  string
		arch  Arch
		kinds []probe.Kind
		specs string
	}{
		{"amd64", AMD64, mixed, "-8@%r13 1@%rbx -2@%rcx 4@%rdi 8@%rsi -1@%r8"},
		{"arm64", ARM64, mixed, "-8@x13 1@x1 -2@x2 4@x3 8@x4 -1@x5"},
		{"amd64 widest", AMD64, widest, "-8@%r13 8@%rbx 8@%rcx 8@%rdi 8@%rsi 8@%r8 8@%r9 8@%r10 8@%r11 8@8(%rsp) 8@16(%rsp) 8@24(%rsp)"},
		{"arm64 widest", ARM64, widest, "-8@x13 8@x1 8@x2 8@x3 8@x4 8@x5 8@x6 8@x7 8@x8 8@x9 8@x10 8@x11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if specs := argSpecs(tt.arch, tt.kinds); specs != tt.specs {
				t.Errorf("specs %q, want %q", specs, tt.specs)
			}
		})
	}
}
