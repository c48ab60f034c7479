// Package asmgen writes the assembly behind every probe: Plan9 stubs and the
// probe table for builds linked by Go's own linker, GNU assembler files with
// notes and semaphores for builds linked by the C toolchain, and the stapsdt
// argument specs that tell a tracer where each argument sits when the NOP
// runs.
//
// It is the tool's internals, not an API for other programs: its clients
// are usdtgen's code generator and the rewrite package, and it changes
// with them.
package asmgen

import (
	"fmt"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
)

// Arch is a GOARCH this package can emit code for.
type Arch string

const (
	AMD64 Arch = "amd64"
	ARM64 Arch = "arm64"
)

// Arches lists every supported architecture, in the order files are written.
var Arches = []Arch{AMD64, ARM64}

func spec(k probe.Kind, operand string) string {
	sign := ""
	if k.Signed() {
		sign = "-"
	}
	return fmt.Sprintf("%s%d@%s", sign, k.Size(), operand)
}

// GoFrame describes a Plan9 stub's ABI0 argument frame.
type GoFrame struct {
	Size int // the argument size the TEXT directive declares: exact, as vet's asmdecl checks
	// Specs are the arguments' note specs ("-8@8(%rsp)"), in order: a
	// note's argument string is some of them joined by spaces.
	Specs []string
	// Offsets are the arguments' offsets from the first, which is at
	// 0(FP) in Plan9 assembly.
	Offsets []int
}

// GoArgs lays out arguments the way the Go compiler passes them to an ABI0
// assembly function: on the stack, each aligned to its own size, like struct
// fields. The stub has no frame, so at its first instruction the arguments
// start one word above the stack pointer: above the return address on amd64,
// above the link-register save slot the caller reserves on arm64.
func GoArgs(arch Arch, kinds []probe.Kind) GoFrame {
	var f GoFrame
	off := 0
	for _, k := range kinds {
		size := k.Size()
		off = (off + size - 1) &^ (size - 1)
		var operand string
		switch arch {
		case AMD64:
			operand = fmt.Sprintf("%d(%%rsp)", 8+off)
		case ARM64:
			operand = fmt.Sprintf("[sp, %d]", 8+off)
		}
		f.Specs = append(f.Specs, spec(k, operand))
		f.Offsets = append(f.Offsets, off)
		off += size
	}
	f.Size = off
	return f
}

var cRegisters = map[Arch][]string{
	AMD64: {"%rdi", "%rsi", "%rdx", "%rcx", "%r8", "%r9"},
	ARM64: {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"},
}

// CArgs gives the argument specs of a C function `void stub(args...)` at its
// first instruction under the platform C ABI (System V on amd64, AAPCS64 on
// arm64): integer registers first, then 8-byte stack slots. Narrow arguments
// name the full register; the size prefix tells the tracer how much of it to
// read, which every consumer honours and which avoids perf's partial table of
// 8-bit register names.
func CArgs(arch Arch, kinds []probe.Kind) string {
	regs := cRegisters[arch]
	var specs []string
	for i, k := range kinds {
		var operand string
		switch {
		case i < len(regs):
			operand = regs[i]
		case arch == AMD64:
			operand = fmt.Sprintf("%d(%%rsp)", 8+8*(i-len(regs)))
		default:
			operand = fmt.Sprintf("[sp, %d]", 8*(i-len(regs)))
		}
		specs = append(specs, spec(k, operand))
	}
	return strings.Join(specs, " ")
}

// CType is the C parameter type a GNU stub declares for a kind.
func CType(k probe.Kind) string {
	switch k {
	case probe.Int8:
		return "int8_t"
	case probe.Uint8:
		return "uint8_t"
	case probe.Int16:
		return "int16_t"
	case probe.Uint16:
		return "uint16_t"
	case probe.Int32:
		return "int32_t"
	case probe.Uint32:
		return "uint32_t"
	case probe.Int64:
		return "int64_t"
	case probe.Uint64:
		return "uint64_t"
	case probe.Uintptr:
		return "uintptr_t"
	case probe.Bool:
		return "_Bool"
	case probe.String:
		return "const char *"
	case probe.Pointer:
		return "void *"
	}
	panic("asmgen: no C type for " + k.String())
}
