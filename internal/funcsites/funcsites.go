// Package funcsites finds where a note-only probe (rules' sites: notes)
// sits in a function as the compiler made it: the function's first
// instruction after its stack check, for the entry probe, and each of its
// returns, for the exit probe.
//
// Such a probe adds no instruction to the function: the link step writes
// a USDT note that points into the function's own code, as sys/sdt.h's
// notes point at a NOP, and a tracer puts its breakpoint there. The entry
// site is past the stack check because a goroutine whose stack must grow
// runs the check twice: runtime.morestack returns to the function's first
// instruction. The check leaves the argument registers and the stack
// pointer as they were at the call, so the arguments are where Go's
// register ABI put them.
//
// The same answer is computed twice, by the link step, which writes the
// notes, and by tracers, which match each note with the probe table's
// description of it: both read the finished executable.
package funcsites

import (
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/probe"
)

// Sites is where one function's probes go.
type Sites struct {
	Entry   uint64
	Returns []uint64
}

// Find returns the sites of the function whose machine code, for arch
// ("amd64" or "arm64"), is code, loaded at addr.
func Find(arch string, addr uint64, code []byte) (Sites, error) {
	switch arch {
	case "amd64":
		return findAMD64(addr, code)
	case "arm64":
		return findARM64(addr, code)
	}
	return Sites{}, fmt.Errorf("note-only probes are not supported on %s (amd64 and arm64 are)", arch)
}

// stackCheckWindow bounds how far into a function its stack check may
// end: the longest, for a frame larger than the stack guard, is five
// instructions.
const stackCheckWindow = 6

// findAMD64 finds the returns by decoding every instruction: Go's code
// holds no data between them. The stack check compares the stack pointer
// (or what it will be, in R12) with the goroutine's stack bound at
// 16(R14) and jumps to the runtime.morestack call on JBE.
func findAMD64(addr uint64, code []byte) (Sites, error) {
	s := Sites{Entry: addr}
	checked := false
	for off, n := 0, 0; off < len(code); n++ {
		inst, err := DecodeAMD64(code[off:])
		if err != nil {
			// The decoder knows no VEX instruction, which Go emits
			// for GOAMD64=v3 (ANDN, SHLX, ...): none is a return or
			// part of the stack check, so only its length matters.
			n, ok := vexLen(code[off:])
			if !ok {
				return s, fmt.Errorf("instruction at %#x: %v", addr+uint64(off), err)
			}
			off += n
			continue
		}
		at := off
		off += inst.Len
		switch {
		case n < stackCheckWindow && inst.Op == x86asm.CMP && boundOperand(inst.Args[1]):
			checked = true
		case n < stackCheckWindow && checked && inst.Op == x86asm.JBE:
			s.Entry, checked = addr+uint64(off), false
		case inst.Op == x86asm.RET:
			s.Returns = append(s.Returns, addr+uint64(at))
		}
	}
	return s, nil
}

// DecodeAMD64 is x86asm.Decode in 64-bit mode, whose decoding of a VEX
// instruction cut short by the code's end panics (golang.org/x/arch
// v0.30.0: index out of range, FuzzFind's seed vex-cut-short): damaged
// code is an error.
func DecodeAMD64(code []byte) (inst x86asm.Inst, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("undecodable (%v)", r)
		}
	}()
	return x86asm.Decode(code, 64)
}

// vexLen is the length of the VEX-encoded instruction b starts with
// (Intel SDM vol. 2, 2.3): its 2- or 3-byte prefix, the opcode, the
// ModRM byte and what it implies (SIB, displacement), and an 8-bit
// immediate for the opcodes that take one.
func vexLen(b []byte) (int, bool) {
	if len(b) < 2 || b[0] != 0xc4 && b[0] != 0xc5 {
		return 0, false
	}
	n, opmap := 2, 1 // C5: the 0F map
	if b[0] == 0xc4 {
		n, opmap = 3, int(b[1]&0x1f)
	}
	if len(b) < n+1 || opmap < 1 || opmap > 3 {
		return 0, false
	}
	op := b[n]
	n++
	if opmap == 1 && op == 0x77 { // VZEROUPPER, VZEROALL: no ModRM
		return n, true
	}
	if len(b) < n+1 {
		return 0, false
	}
	modrm := b[n]
	n++
	mod, rm := modrm>>6, modrm&7
	if mod != 3 && rm == 4 { // SIB
		if len(b) < n+1 {
			return 0, false
		}
		if b[n]&7 == 5 && mod == 0 {
			n += 4
		}
		n++
	}
	switch {
	case mod == 0 && rm == 5: // RIP-relative
		n += 4
	case mod == 1:
		n++
	case mod == 2:
		n += 4
	}
	switch {
	case opmap == 3, opmap == 1 && (op >= 0x70 && op <= 0x73 || op >= 0xc2 && op <= 0xc6):
		n++
	}
	return n, n <= len(b)
}

// boundOperand reports the stack bound, g.stackguard0: 16(R14).
func boundOperand(a x86asm.Arg) bool {
	m, ok := a.(x86asm.Mem)
	return ok && m.Base == x86asm.R14 && m.Index == 0 && m.Disp == 16
}

// findARM64 reads the fixed four-byte words by their encodings. The
// stack check loads the bound from 16(R28), g's register (LDR Xt,
// [X28, #16]), compares, and branches to the runtime.morestack call on LS.
func findARM64(addr uint64, code []byte) (Sites, error) {
	const (
		boundLoadMask, boundLoad = 0xffffffe0, 0xf9400b80 // LDR Xt, [X28, #16]
		condBranchMask, condLS   = 0xff00001f, 0x54000009 // B.LS
		retMask, ret             = 0xfffffc1f, 0xd65f0000 // RET Xn
	)
	s := Sites{Entry: addr}
	loaded := false
	for off := 0; off+4 <= len(code); off += 4 {
		n, word := off/4, binary.LittleEndian.Uint32(code[off:])
		switch {
		case n < stackCheckWindow && word&boundLoadMask == boundLoad:
			loaded = true
		case n < stackCheckWindow && loaded && word&condBranchMask == condLS:
			s.Entry, loaded = addr+uint64(off+4), false
		case word&retMask == ret:
			s.Returns = append(s.Returns, addr+uint64(off))
		}
	}
	return s, nil
}

// Symbols finds functions of an executable by their linker names.
type Symbols struct {
	f     *elf.File
	funcs map[string][2]uint64 // name -> [start, end)
}

// NewSymbols indexes f's functions: from its symbol table, or, for an
// executable built with -s, from the runtime's own table, .gopclntab,
// which every Go executable keeps.
func NewSymbols(f *elf.File) (*Symbols, error) {
	s := &Symbols{f: f, funcs: map[string][2]uint64{}}
	syms, err := f.Symbols()
	if err == nil {
		for _, sym := range syms {
			if elf.ST_TYPE(sym.Info) == elf.STT_FUNC && sym.Size > 0 {
				s.funcs[sym.Name] = [2]uint64{sym.Value, sym.Value + sym.Size}
			}
		}
		return s, nil
	}
	if !errors.Is(err, elf.ErrNoSymbols) {
		return nil, err
	}
	table, err := GoTable(f)
	if err != nil {
		return nil, err
	}
	if table == nil {
		return nil, errors.New("no symbol table and no .gopclntab: not a Go executable")
	}
	for _, fn := range table.Funcs {
		s.funcs[fn.Name] = [2]uint64{fn.Entry, fn.End}
	}
	return s, nil
}

// GoTable reads f's functions from the runtime's own table, .gopclntab,
// which every Go executable keeps, stripped or not; nil for a file
// without one.
func GoTable(f *elf.File) (*gosym.Table, error) {
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return nil, nil
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, fmt.Errorf(".gopclntab: %w", err)
	}
	return goTable(data, text.Addr)
}

// goTable is GoTable on the table's bytes, data, for code at text. A
// table whose header counts more functions than its bytes hold is
// refused: debug/gosym makes room for every function it counts before
// it reads one, and a damaged binary's count exhausts the memory, which
// no recover catches.
func goTable(data []byte, text uint64) (*gosym.Table, error) {
	if len(data) >= 16 && (data[7] == 4 || data[7] == 8) {
		var order binary.ByteOrder
		switch {
		case pclnMagic(binary.LittleEndian.Uint32(data)):
			order = binary.LittleEndian
		case pclnMagic(binary.BigEndian.Uint32(data)):
			order = binary.BigEndian
		}
		if order != nil {
			n := uint64(order.Uint32(data[8:]))
			if data[7] == 8 {
				n = order.Uint64(data[8:])
			}
			// A function takes 8 bytes of the table at least: its
			// entry in the function table, two 4-byte words.
			if n > uint64(len(data))/8 {
				return nil, fmt.Errorf(".gopclntab: damaged: its header counts %d functions in %d bytes (the binary is not as Go's linker wrote it)", n, len(data))
			}
		}
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text))
	if err != nil {
		return nil, fmt.Errorf(".gopclntab: %w", err)
	}
	return table, nil
}

// pclnMagic reports whether magic starts a .gopclntab of a release
// debug/gosym reads: Go 1.2, 1.16, 1.18 or 1.20 and later.
func pclnMagic(magic uint32) bool {
	switch magic {
	case 0xfffffffb, 0xfffffffa, 0xfffffff0, 0xfffffff1:
		return true
	}
	return false
}

// Entry returns where the function named name starts, and whether the
// executable has it.
func (s *Symbols) Entry(name string) (uint64, bool) {
	r, ok := s.funcs[name]
	return r[0], ok
}

// Names returns the names of every function, in no order.
func (s *Symbols) Names() []string {
	names := make([]string, 0, len(s.funcs))
	for name := range s.funcs {
		names = append(names, name)
	}
	return names
}

// maxFuncSize bounds the code Find reads of a function, which a damaged
// binary's symbol may make any size: Go's largest are some hundreds of
// KB.
const maxFuncSize = 16 << 20

// ErrNoFunction reports a function the executable does not have: the
// linker left it out, as it does every function nothing calls.
var ErrNoFunction = errors.New("no such function")

// Arch is the GOARCH of an executable of machine m that the project
// reads the code of, amd64 or arm64, or "" for another.
func Arch(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	}
	return ""
}

// Code returns the machine code of the function named name, and where
// it starts; ErrNoFunction for a function the executable does not have.
func (s *Symbols) Code(name string) (start uint64, code []byte, err error) {
	r, ok := s.funcs[name]
	if !ok {
		return 0, nil, ErrNoFunction
	}
	// A damaged binary's symbol may end before it begins, or past where
	// an address can be.
	if r[1] < r[0] || r[1]-r[0] > maxFuncSize {
		return 0, nil, fmt.Errorf("%s: its code at %#x, %d bytes up to %#x, is not a function's (the binary is damaged)", name, r[0], int64(r[1]-r[0]), r[1])
	}
	for _, sec := range s.f.Sections {
		if sec.Flags&elf.SHF_EXECINSTR == 0 || r[0] < sec.Addr || r[1] > sec.Addr+sec.Size {
			continue
		}
		code := make([]byte, r[1]-r[0])
		if _, err := sec.ReadAt(code, int64(r[0]-sec.Addr)); err != nil {
			return 0, nil, fmt.Errorf("%s: %w", name, err)
		}
		return r[0], code, nil
	}
	return 0, nil, fmt.Errorf("%s: its code at %#x is in no executable section", name, r[0])
}

// Find returns the sites of the function named name, for the
// executable's architecture.
func (s *Symbols) Find(name string) (Sites, error) {
	start, code, err := s.Code(name)
	if err != nil {
		return Sites{}, err
	}
	sites, err := Find(Arch(s.f.Machine), start, code)
	if err != nil {
		return sites, fmt.Errorf("%s: %w", name, err)
	}
	return sites, nil
}

// Place gives each note-only probe of probes (those with a Func) its
// sites in the executable f: an entry probe one, an exit probe one per
// return, each a probe of its own with its PC; a record of another kind
// (autoprobe.KeptInlined) none. Other probes are kept as they are. A function the linker left out has no probes; one whose code
// does not decode loses them, with an error saying so.
func Place(f *elf.File, probes []probe.Probe) ([]probe.Probe, []error) {
	var syms *Symbols
	var errs []error
	placed := probes[:0:0]
	sites := map[string]Sites{}
	for _, p := range probes {
		if p.Func == "" {
			placed = append(placed, p)
			continue
		}
		kind, _, _, _ := autoprobe.Split(p.Name)
		if kind != "entry" && kind != "exit" {
			continue
		}
		if syms == nil {
			var err error
			if syms, err = NewSymbols(f); err != nil {
				return placed, append(errs, fmt.Errorf("placing note-only probes: %w", err))
			}
		}
		s, ok := sites[p.Func]
		if !ok {
			var err error
			s, err = syms.Find(p.Func)
			if err != nil && !errors.Is(err, ErrNoFunction) {
				errs = append(errs, fmt.Errorf("probes %s:%s: %w", p.Provider, p.Name, err))
			}
			if err != nil {
				s = Sites{}
			}
			sites[p.Func] = s
		}
		pcs := s.Returns
		if kind == "entry" {
			pcs = nil
			if s.Entry != 0 {
				pcs = []uint64{s.Entry}
			}
		}
		for _, pc := range pcs {
			p.PC = pc
			placed = append(placed, p)
		}
	}
	return placed, errs
}
