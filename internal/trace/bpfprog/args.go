package bpfprog

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-usdt/usdt/internal/sdtnote"
)

// Arg is where one probe argument sits when the probe fires: in a
// register (RegOff is its offset in the kernel's pt_regs), or in user
// memory at that register plus Disp; and how wide it is.
type Arg struct {
	// Const says the argument is the constant Disp ("8@$0").
	Const  bool
	Deref  bool
	RegOff uint16
	Disp   int64
	Size   int
	Signed bool
}

// ptRegs gives each register's offset in the pt_regs a uprobe program
// receives, per GOARCH.
var ptRegs = map[string]map[string]uint16{
	// arch/x86/include/asm/ptrace.h: r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax
	// cx dx si di orig_ax ip cs flags sp ss. Sub-registers read the whole
	// register; size trims it.
	"amd64": regNames([][]string{
		{"r15", "r15d", "r15w", "r15b"}, {"r14", "r14d", "r14w", "r14b"},
		{"r13", "r13d", "r13w", "r13b"}, {"r12", "r12d", "r12w", "r12b"},
		{"rbp", "ebp", "bp", "bpl"}, {"rbx", "ebx", "bx", "bl"},
		{"r11", "r11d", "r11w", "r11b"}, {"r10", "r10d", "r10w", "r10b"},
		{"r9", "r9d", "r9w", "r9b"}, {"r8", "r8d", "r8w", "r8b"},
		{"rax", "eax", "ax", "al"}, {"rcx", "ecx", "cx", "cl"},
		{"rdx", "edx", "dx", "dl"}, {"rsi", "esi", "si", "sil"},
		{"rdi", "edi", "di", "dil"}, {"orig_ax"}, {"rip"}, {"cs"}, {"flags"},
		{"rsp", "esp", "sp", "spl"},
	}),
	// arch/arm64/include/asm/ptrace.h user_pt_regs: regs[31] sp pc pstate.
	"arm64": arm64Regs(),
}

func regNames(groups [][]string) map[string]uint16 {
	m := map[string]uint16{}
	for i, g := range groups {
		for _, n := range g {
			m[n] = uint16(8 * i)
		}
	}
	return m
}

func arm64Regs() map[string]uint16 {
	m := map[string]uint16{"sp": 31 * 8, "pc": 32 * 8}
	for i := range 31 {
		m[fmt.Sprintf("x%d", i)] = uint16(8 * i)
		m[fmt.Sprintf("w%d", i)] = uint16(8 * i)
	}
	return m
}

// ParseArgs parses a note's argument string ("-4@%edi 8@16(%rsp)" on amd64,
// "-4@x0 8@[sp, 16]" on arm64).
func ParseArgs(arch, s string) ([]Arg, error) {
	var specs []Arg
	for _, f := range sdtnote.SplitArgs(s) {
		a, err := parseArg(arch, f)
		if err != nil {
			return nil, fmt.Errorf("argument %d %q: %w", len(specs), f, err)
		}
		specs = append(specs, a)
	}
	return specs, nil
}

func parseArg(arch, s string) (Arg, error) {
	var a Arg
	size, loc, ok := strings.Cut(s, "@")
	if !ok {
		return a, fmt.Errorf("no @")
	}
	n, err := strconv.Atoi(size)
	a.Signed, a.Size = n < 0, max(n, -n)
	if err != nil || a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
		return a, fmt.Errorf("bad size %q", size)
	}
	// A constant: "$0" on amd64, "0" on arm64, as GCC writes them.
	constant, isConst := strings.CutPrefix(loc, "$")
	if arch == "arm64" {
		isConst = loc != "" && (loc[0] == '-' || '0' <= loc[0] && loc[0] <= '9')
	}
	if isConst {
		a.Const = true
		if a.Disp, err = strconv.ParseInt(constant, 0, 64); err != nil {
			return a, fmt.Errorf("bad constant %q", loc)
		}
		return a, nil
	}
	regs := ptRegs[arch]
	reg := func(name string) error {
		off, ok := regs[name]
		if !ok {
			return fmt.Errorf("unknown %s register %q", arch, name)
		}
		a.RegOff = off
		return nil
	}
	switch arch {
	case "amd64":
		if r, ok := strings.CutPrefix(loc, "%"); ok {
			return a, reg(r)
		}
		disp, rest, ok := strings.Cut(loc, "(%")
		if !ok || !strings.HasSuffix(rest, ")") {
			return a, fmt.Errorf("unsupported operand %q", loc)
		}
		a.Deref = true
		if disp != "" {
			if a.Disp, err = strconv.ParseInt(disp, 0, 64); err != nil {
				return a, fmt.Errorf("bad displacement %q", disp)
			}
		}
		return a, reg(strings.TrimSuffix(rest, ")"))
	case "arm64":
		inner, ok := strings.CutPrefix(loc, "[")
		if !ok {
			return a, reg(loc)
		}
		inner, ok = strings.CutSuffix(inner, "]")
		if !ok {
			return a, fmt.Errorf("unsupported operand %q", loc)
		}
		a.Deref = true
		r, disp, _ := strings.Cut(inner, ",")
		if disp = strings.TrimSpace(disp); disp != "" {
			if a.Disp, err = strconv.ParseInt(disp, 0, 64); err != nil {
				return a, fmt.Errorf("bad offset %q", disp)
			}
		}
		return a, reg(strings.TrimSpace(r))
	}
	return a, fmt.Errorf("unsupported architecture %s", arch)
}
