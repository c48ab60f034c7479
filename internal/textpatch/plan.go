package textpatch

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/go-usdt/usdt/internal/funcsites"
	"github.com/go-usdt/usdt/internal/x86step"
)

// A Patch switches one function to another by its Writes, each of which
// replaces the bytes at At, Old, with New.
type Patch struct {
	// Func and To name the function switched and the one it is switched
	// to; Entry and Target are their addresses.
	Func, To      string
	Entry, Target uint64
	Writes        []Write
	// Index names the function among those of its executable that have
	// a traced copy, the same for every tracer of the executable: its
	// rank (internal/switchplan), by which tracers hold its switch
	// (internal/switchhold). Planner.Plan leaves it 0.
	Index int
	// Unswitchable is how many functions right after this one in
	// Index's order no tracer can switch (Plan refuses them): a hold
	// on this one may cover theirs too, which keeps a tracer's holds
	// few (internal/switchplan's Hold). Planner.Plan leaves it 0.
	Unswitchable int
}

// Moved returns p for a process that loaded the executable bias bytes
// above its link-time addresses (a position-independent one): every
// jump is relative, so only the addresses move.
func (p Patch) Moved(bias uint64) Patch {
	p.Entry += bias
	p.Target += bias
	p.Writes = slices.Clone(p.Writes)
	for i := range p.Writes {
		p.Writes[i].At += bias
	}
	return p
}

// A Write is one instruction's change. None starts a new instruction
// boundary: it replaces one instruction by another of the same length,
// or bytes inside one instruction, so a thread is never stopped, nor
// interrupted by a signal, inside it.
type Write struct {
	At       uint64
	Old, New []byte
}

// A Planner plans the patches of one executable.
type Planner struct {
	arch string
	syms *funcsites.Symbols
	// morestack is where runtime.morestack_noctxt starts (amd64).
	morestack uint64
}

// NewPlanner reads f's functions.
func NewPlanner(f *elf.File) (*Planner, error) {
	arch := funcsites.Arch(f.Machine)
	if arch == "" {
		return nil, fmt.Errorf("switching functions is supported on amd64 and arm64, not %v", f.Machine)
	}
	syms, err := funcsites.NewSymbols(f)
	if err != nil {
		return nil, err
	}
	p := &Planner{arch: arch, syms: syms}
	for _, name := range []string{"runtime.morestack_noctxt.abi0", "runtime.morestack_noctxt"} {
		if start, ok := syms.Entry(name); ok {
			p.morestack = start
			break
		}
	}
	return p, nil
}

// Funcs returns the names of the executable's functions, in no order.
func (p *Planner) Funcs() []string { return p.syms.Names() }

// ErrUnswitchable is Plan's error, wrapped with the details, for a
// function whose code cannot take the jump safely. A function the
// executable does not have is funcsites.ErrNoFunction.
var ErrUnswitchable = errors.New("cannot be switched")

// Plan plans switching the function named name to the one named to.
func (p *Planner) Plan(name, to string) (Patch, error) {
	target, ok := p.syms.Entry(to)
	if !ok {
		return Patch{}, fmt.Errorf("%s: %w", to, funcsites.ErrNoFunction)
	}
	start, code, err := p.syms.Code(name)
	if errors.Is(err, funcsites.ErrNoFunction) {
		return Patch{}, fmt.Errorf("%s: %w", name, err)
	}
	if err != nil {
		return Patch{}, err
	}
	pt := Patch{Func: name, To: to, Entry: start, Target: target}
	switch p.arch {
	case "amd64":
		err = p.planAMD64(&pt, code)
	case "arm64":
		err = planARM64(&pt, code)
	}
	if err != nil {
		return Patch{}, fmt.Errorf("%s: %w: %w", name, ErrUnswitchable, err)
	}
	return pt, nil
}

// Go's amd64 stack check, first in every function with a frame:
//
//	CMPQ SP, 16(R14)      49 3b 66 10       or, for a frame past 128 bytes,
//	                                        LEAQ -N(SP), R12; CMPQ R12, 16(R14)
//	JBE  more             76 XX | 0f 86 XXXXXXXX
//	...
//	more: spills of the argument registers to their slots, 8(SP)...
//	CALL runtime.morestack_noctxt
//	reloads; JMP entry
const (
	boundDisp = 0x10 // g.stackguard0
	hiDisp    = 0x08 // g.stack.hi, which SP never passes
	callRel32 = 0xe8
	jmpRel32  = 0xe9
)

// planAMD64 plans two writes. The CALL of runtime.morestack_noctxt
// becomes a JMP to the target, and the check's bound becomes the top of
// the stack, which SP is always below, so that every call takes the
// branch to the spills and the jump. The spills store the arguments into
// the slots the caller gave them and change no register: the target
// starts with the arguments where its caller put them. A goroutine that
// a stack growth or a preemption parked in runtime.morestack returns
// after the CALL, to bytes that neither write changes, reloads its
// arguments and starts the function again. code is the function's.
func (p *Planner) planAMD64(pt *Patch, code []byte) error {
	// The check's CMP is the first instruction or the second, after
	// the LEAQ, and its 8-bit displacement is its last byte.
	var cmpEnd int
	for off, n := 0, 0; n < 2 && off < len(code); n++ {
		inst, err := funcsites.DecodeAMD64(code[off:])
		if err != nil {
			return fmt.Errorf("its instruction at +%#x does not decode: %v", off, err)
		}
		off += inst.Len
		if inst.Op == x86asm.CMP && boundArg(inst.Args[1]) && code[off-1] == boundDisp {
			cmpEnd = off
			break
		}
	}
	if cmpEnd == 0 {
		return errors.New("it does not start with the stack check CMP ..., 16(R14): a frameless function, one with a frame of more than the stack guard, or one marked NOSPLIT")
	}
	jbe, err := funcsites.DecodeAMD64(code[cmpEnd:])
	if err != nil || jbe.Op != x86asm.JBE {
		return errors.New("its stack check's CMP is not followed by JBE")
	}
	rel, _ := jbe.Args[0].(x86asm.Rel)
	more := cmpEnd + jbe.Len + int(rel)
	if more <= cmpEnd || more >= len(code) {
		return fmt.Errorf("its stack check branches to +%#x, outside the function", more)
	}
	// The spills, then the CALL.
	call := more
	for {
		inst, err := funcsites.DecodeAMD64(code[call:])
		if err != nil {
			return fmt.Errorf("its instruction at +%#x does not decode: %v", call, err)
		}
		if inst.Op == x86asm.CALL {
			if inst.Len != 5 || code[call] != callRel32 {
				return fmt.Errorf("its stack growth's call at +%#x (%v) is not CALL rel32", call, inst)
			}
			break
		}
		if !spill(inst) {
			return fmt.Errorf("its stack growth runs %v at +%#x before its call, which is not a spill of an argument", inst, call)
		}
		call += inst.Len
	}
	callee := uint64(int64(pt.Entry) + int64(call) + 5 + int64(int32(binary.LittleEndian.Uint32(code[call+1:]))))
	if callee != p.morestack || callee == 0 {
		return fmt.Errorf("its stack growth calls %#x, not runtime.morestack_noctxt (%#x)", callee, p.morestack)
	}
	// No branch of the function lands inside a write, and none goes to
	// the target: a function that calls its traced copy itself (split by
	// sites: code) is no plain function.
	for off := 0; off < len(code); {
		step, err := x86step.Read(code[off:])
		if err != nil {
			return fmt.Errorf("its instruction at +%#x does not decode: %v", off, err)
		}
		if step.Branch {
			t := off + step.Len + int(step.Rel)
			if t > call && t < call+5 || t == cmpEnd-1 {
				inst, _ := funcsites.DecodeAMD64(code[off:])
				return fmt.Errorf("its instruction at +%#x (%v) branches to +%#x, inside a write", off, inst, t)
			}
			if pt.Entry+uint64(t) == pt.Target {
				return fmt.Errorf("it calls %s itself", pt.To)
			}
		}
		off += step.Len
	}
	far := int64(pt.Target) - int64(pt.Entry+uint64(call)+5)
	if far != int64(int32(far)) {
		return fmt.Errorf("%s is %d bytes away, out of a jump's reach", pt.To, far)
	}
	// The JMP first: a tracer that dies between the two writes leaves
	// the stack's growth running the target, which means the same.
	pt.Writes = []Write{
		{At: pt.Entry + uint64(call), Old: slices.Clone(code[call : call+5]), New: binary.LittleEndian.AppendUint32([]byte{jmpRel32}, uint32(int32(far)))},
		{At: pt.Entry + uint64(cmpEnd-1), Old: []byte{boundDisp}, New: []byte{hiDisp}},
	}
	return nil
}

// boundArg reports the stack bound operand, 16(R14).
func boundArg(a x86asm.Arg) bool {
	m, ok := a.(x86asm.Mem)
	return ok && m.Base == x86asm.R14 && m.Index == 0 && m.Disp == boundDisp
}

// spill reports whether inst stores a register into the stack, as the
// spills of the arguments before runtime.morestack do, or is a NOP that
// aligns the CALL.
func spill(inst x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.NOP:
		return true
	case x86asm.MOV, x86asm.MOVQ, x86asm.MOVSD_XMM, x86asm.MOVSS, x86asm.MOVUPS:
	default:
		return false
	}
	m, ok := inst.Args[0].(x86asm.Mem)
	_, reg := inst.Args[1].(x86asm.Reg)
	return ok && reg && m.Base == x86asm.RSP && m.Index == 0
}

// planARM64 plans B to the target in place of the first instruction.
func planARM64(pt *Patch, code []byte) error {
	if len(code) < 4 {
		return errors.New("it has no instruction")
	}
	const brkMask, brk = 0xffe0001f, 0xd4200000 // BRK #imm
	if w := binary.LittleEndian.Uint32(code); w&brkMask == brk {
		return fmt.Errorf("its first instruction is a breakpoint (%#08x)", w)
	}
	for off := 0; off+4 <= len(code); off += 4 {
		if inst, err := arm64asm.Decode(code[off:]); err == nil && (inst.Op == arm64asm.BL || inst.Op == arm64asm.B) {
			if rel, ok := inst.Args[0].(arm64asm.PCRel); ok && pt.Entry+uint64(off)+uint64(int64(rel)) == pt.Target {
				return fmt.Errorf("it calls %s itself", pt.To)
			}
		}
	}
	delta := int64(pt.Target) - int64(pt.Entry)
	if delta%4 != 0 || delta < -(1<<27) || delta >= 1<<27 {
		return fmt.Errorf("%s is %d bytes away, out of B's reach", pt.To, delta)
	}
	pt.Writes = []Write{{At: pt.Entry, Old: slices.Clone(code[:4]), New: binary.LittleEndian.AppendUint32(nil, 0x14000000|uint32(delta/4)&0x03ffffff)}}
	return nil
}
