package bpfprog

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPtRegsOffsets checks where ParseArgs reads each register: the offset
// of its field in the registers a uprobe program receives, written here
// from the kernels' headers. arm64 (arch/arm64/include/uapi/asm/ptrace.h):
//
//	struct user_pt_regs { __u64 regs[31]; __u64 sp; __u64 pc; __u64 pstate; };
//
// amd64 (arch/x86/include/uapi/asm/ptrace.h): r15 r14 r13 r12 rbp rbx r11
// r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss, 8 bytes each.
func TestPtRegsOffsets(t *testing.T) {
	tests := []struct {
		arch, operand string
		want          Arg
	}{
		{"arm64", "8@x0", Arg{RegOff: 0, Size: 8}},
		{"arm64", "8@x1", Arg{RegOff: 8, Size: 8}},
		{"arm64", "8@x7", Arg{RegOff: 56, Size: 8}},
		{"arm64", "8@x13", Arg{RegOff: 104, Size: 8}},
		{"arm64", "8@x28", Arg{RegOff: 224, Size: 8}},
		{"arm64", "8@x29", Arg{RegOff: 232, Size: 8}},
		{"arm64", "8@x30", Arg{RegOff: 240, Size: 8}},
		{"arm64", "8@sp", Arg{RegOff: 248, Size: 8}},
		// A w register is the low half of its x register.
		{"arm64", "-4@w2", Arg{RegOff: 16, Size: 4, Signed: true}},
		{"arm64", "-8@[sp, 8]", Arg{Deref: true, RegOff: 248, Disp: 8, Size: 8, Signed: true}},
		{"arm64", "4@[sp, 96]", Arg{Deref: true, RegOff: 248, Disp: 96, Size: 4}},
		{"arm64", "8@[x29, -16]", Arg{Deref: true, RegOff: 232, Disp: -16, Size: 8}},
		{"arm64", "1@[x1]", Arg{Deref: true, RegOff: 8, Size: 1}},
		{"amd64", "8@%r15", Arg{RegOff: 0, Size: 8}},
		{"amd64", "8@%rbp", Arg{RegOff: 32, Size: 8}},
		{"amd64", "8@%rax", Arg{RegOff: 80, Size: 8}},
		{"amd64", "-4@%edi", Arg{RegOff: 112, Size: 4, Signed: true}},
		{"amd64", "8@%rip", Arg{RegOff: 128, Size: 8}},
		{"amd64", "8@16(%rsp)", Arg{Deref: true, RegOff: 152, Disp: 16, Size: 8}},
	}
	for _, tt := range tests {
		got, err := parseArg(tt.arch, tt.operand)
		if err != nil || got != tt.want {
			t.Errorf("parseArg(%s, %q) = %+v, %v; want %+v", tt.arch, tt.operand, got, err, tt.want)
		}
	}
}

// headerRegs are, per GOARCH, the C compiler that targets it, the struct
// its <asm/ptrace.h> gives a uprobe program, and that struct's field for
// each register name ParseArgs knows, sub-registers taken as their
// register.
var headerRegs = map[string]struct {
	cc, structName string
	field          func(reg string) string
}{
	"arm64": {"aarch64-linux-gnu-gcc", "user_pt_regs", func(reg string) string {
		if reg == "sp" || reg == "pc" {
			return reg
		}
		return "regs[" + reg[1:] + "]"
	}},
	"amd64": {"x86_64-linux-gnu-gcc", "pt_regs", func(reg string) string {
		return map[string]string{
			"r15": "r15", "r15d": "r15", "r15w": "r15", "r15b": "r15",
			"r14": "r14", "r14d": "r14", "r14w": "r14", "r14b": "r14",
			"r13": "r13", "r13d": "r13", "r13w": "r13", "r13b": "r13",
			"r12": "r12", "r12d": "r12", "r12w": "r12", "r12b": "r12",
			"rbp": "rbp", "ebp": "rbp", "bp": "rbp", "bpl": "rbp",
			"rbx": "rbx", "ebx": "rbx", "bx": "rbx", "bl": "rbx",
			"r11": "r11", "r11d": "r11", "r11w": "r11", "r11b": "r11",
			"r10": "r10", "r10d": "r10", "r10w": "r10", "r10b": "r10",
			"r9": "r9", "r9d": "r9", "r9w": "r9", "r9b": "r9",
			"r8": "r8", "r8d": "r8", "r8w": "r8", "r8b": "r8",
			"rax": "rax", "eax": "rax", "ax": "rax", "al": "rax",
			"rcx": "rcx", "ecx": "rcx", "cx": "rcx", "cl": "rcx",
			"rdx": "rdx", "edx": "rdx", "dx": "rdx", "dl": "rdx",
			"rsi": "rsi", "esi": "rsi", "si": "rsi", "sil": "rsi",
			"rdi": "rdi", "edi": "rdi", "di": "rdi", "dil": "rdi",
			"orig_ax": "orig_rax", "rip": "rip", "cs": "cs", "flags": "eflags",
			"rsp": "rsp", "esp": "rsp", "sp": "rsp", "spl": "rsp",
		}[reg]
	}},
}

// TestPtRegsMatchHeaders compares every register's offset in ptRegs with
// offsetof on the installed kernel headers, as the architecture's C
// compiler lays the struct out: it compiles an array of the offsets and
// reads it back from the object file.
func TestPtRegsMatchHeaders(t *testing.T) {
	for arch, h := range headerRegs {
		t.Run(arch, func(t *testing.T) {
			if _, err := exec.LookPath(h.cc); err != nil {
				t.Skipf("%s not found (%v): cannot lay out its <asm/ptrace.h> (Debian package gcc-%s)", h.cc, err, strings.TrimSuffix(h.cc, "-gcc"))
			}
			var regs []string
			var src strings.Builder
			fmt.Fprintf(&src, "#include <stddef.h>\n#include <asm/ptrace.h>\nconst unsigned long long offsets[] = {\n")
			for reg := range ptRegs[arch] {
				field := h.field(reg)
				if field == "" {
					t.Fatalf("no %s field for register %q", h.structName, reg)
				}
				regs = append(regs, reg)
				fmt.Fprintf(&src, "\toffsetof(struct %s, %s),\n", h.structName, field)
			}
			src.WriteString("};\n")
			dir := t.TempDir()
			c, obj := filepath.Join(dir, "offsets.c"), filepath.Join(dir, "offsets.o")
			if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(h.cc, "-c", "-o", obj, c).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s\n%s", h.cc, err, out, src.String())
			}
			offsets := readOffsets(t, obj, len(regs))
			for i, reg := range regs {
				if got := ptRegs[arch][reg]; uint64(got) != offsets[i] {
					t.Errorf("%s register %s at %d, the header's struct %s.%s at %d", arch, reg, got, h.structName, h.field(reg), offsets[i])
				}
			}
		})
	}
}

// readOffsets reads the n 64-bit values of the symbol offsets in obj.
func readOffsets(t *testing.T, obj string, n int) []uint64 {
	t.Helper()
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != "offsets" {
			continue
		}
		data, err := f.Sections[s.Section].Data()
		if err != nil {
			t.Fatal(err)
		}
		if s.Size != uint64(8*n) || s.Value+s.Size > uint64(len(data)) {
			t.Fatalf("offsets is %d bytes at %d of %d, want %d values", s.Size, s.Value, len(data), n)
		}
		out := make([]uint64, n)
		for i := range out {
			out[i] = binary.LittleEndian.Uint64(data[s.Value+uint64(8*i):])
		}
		return out
	}
	t.Fatalf("%s has no symbol offsets", obj)
	return nil
}
