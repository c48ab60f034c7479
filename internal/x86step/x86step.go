// Package x86step walks amd64 machine code an instruction at a time:
// the length of each, and, for a relative jump or call, where it goes.
// A table of the encodings Go's compiler emits answers most
// instructions (99.4 % of a real Go executable's) ten times faster than
// decoding them whole with x86asm, which answers the rest.
package x86step

import (
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"

	"github.com/go-usdt/usdt/internal/funcsites"
)

// A Step is what a walk over a function's amd64 code needs of one
// instruction: its length and, for a relative jump or call, the
// displacement from the instruction's end to its target.
type Step struct {
	Len    int
	Rel    int64
	Branch bool // Rel is a relative jump's or call's
}

// Read reads the instruction code starts with, as funcsites.DecodeAMD64
// would: a table of the encodings Go's compiler emits most answers
// without decoding the whole instruction, ten times faster;
// funcsites.DecodeAMD64 answers the rest. A switch's plan walks every
// instruction of every function switched (36,908 of Caddy's), which
// took seconds.
func Read(code []byte) (Step, error) {
	if s, ok := fast(code); ok {
		return s, nil
	}
	return slow(code)
}

// slow is Read by x86asm alone.
func slow(code []byte) (Step, error) {
	inst, err := funcsites.DecodeAMD64(code)
	if err != nil {
		return Step{}, err
	}
	s := Step{Len: inst.Len}
	for _, a := range inst.Args {
		if rel, ok := a.(x86asm.Rel); ok {
			s.Rel, s.Branch = int64(rel), true
		}
	}
	return s, nil
}

// The bits of the prefixes that fast knows, in its seen.
const (
	p66 = 1 << iota
	pF2
	pF3
	pLock // F0
	pFS   // 64
	pGS   // 65
)

// fast is Read for the common encodings: the one-byte opcodes
// and the 0F ones that take a ModRM byte, after two of the prefixes 66,
// F2, F3, F0, 64 and 65 at most, and a REX. ok is false for any
// other, and for anything it does not know well enough to answer
// exactly as x86asm would (TestEncodings, TestAgrees and
// FuzzRead check that it does).
func fast(b []byte) (s Step, ok bool) {
	i := 0
	var seen uint8 // the prefixes seen, a bit each
prefixes:
	for ; i < len(b); i++ {
		var bit uint8
		switch b[i] {
		case 0x66:
			bit = p66
		case 0xf2:
			bit = pF2
		case 0xf3:
			bit = pF3
		case 0xf0:
			bit = pLock
		case 0x64:
			bit = pFS
		case 0x65:
			bit = pGS
		default:
			break prefixes
		}
		if seen&bit != 0 || i == 2 {
			return s, false // TestEncodings checks two at most
		}
		seen |= bit
	}
	opsize16, rep, prefixed := seen&p66 != 0, seen&pF3 != 0, seen != 0
	w := false
	if i < len(b) && b[i]&0xf0 == 0x40 {
		w = b[i]&8 != 0
		i++
	}
	if i >= len(b) {
		return s, false
	}
	immz := 4
	if opsize16 && !w {
		immz = 2
	}
	op := b[i]
	i++
	end := -1 // the instruction's end, where known
	switch {
	case op == 0x0f:
		return fast0F(b, i, seen, w)
	case op < 0x40:
		switch op & 7 {
		case 0, 1, 2, 3:
			end = modrm(b, i, 0)
		case 4:
			end = i + 1
		case 5:
			end = i + immz
		}
		if op == 0x26 || op == 0x2e || op == 0x36 || op == 0x3e {
			return s, false
		}
	case op >= 0x50 && op <= 0x5f, op >= 0x90 && op <= 0x99, op == 0xc3, op == 0xcc:
		if op == 0x90 && rep || op == 0xc3 && prefixed {
			return s, false // PAUSE; REP RET
		}
		end = i
	case op == 0x63, op >= 0x84 && op <= 0x8b:
		end = modrm(b, i, 0)
	case op >= 0xd0 && op <= 0xd3, op == 0xc0, op == 0xc1:
		if i >= len(b) || b[i]>>3&7 == 6 {
			return s, false // the shifts' unassigned /6
		}
		if op >= 0xd0 {
			end = modrm(b, i, 0)
		} else {
			end = modrm(b, i, 1)
		}
	case op == 0x8d:
		if i < len(b) && b[i]>>6 == 3 {
			return s, false // LEA of a register
		}
		end = modrm(b, i, 0)
	case op == 0x68:
		end = i + immz
	case op == 0x6a, op == 0xa8, op >= 0xb0 && op <= 0xb7:
		end = i + 1
	case op == 0x69:
		end = modrm(b, i, immz)
	case op == 0x6b, op == 0x80, op == 0x83:
		end = modrm(b, i, 1)
	case op == 0x81:
		end = modrm(b, i, immz)
	case op == 0xa9:
		end = i + immz
	case op >= 0xb8 && op <= 0xbf:
		if w {
			end = i + 8
		} else {
			end = i + immz
		}
	case op == 0xc6, op == 0xc7:
		if i >= len(b) || b[i]>>3&7 != 0 {
			return s, false // XABORT, XBEGIN
		}
		if op == 0xc6 {
			end = modrm(b, i, 1)
		} else {
			end = modrm(b, i, immz)
		}
	case op == 0xf6, op == 0xf7:
		if i >= len(b) {
			return s, false
		}
		imm := 0
		switch b[i] >> 3 & 7 {
		case 1:
			return s, false // TEST's unassigned alias
		case 0: // TEST r/m, imm
			imm = 1
			if op == 0xf7 {
				imm = immz
			}
		}
		end = modrm(b, i, imm)
	case op == 0xfe, op == 0xff:
		if i >= len(b) {
			return s, false
		}
		if reg := b[i] >> 3 & 7; op == 0xfe && reg > 1 || op == 0xff && (reg == 3 || reg == 5 || reg == 7) {
			return s, false
		}
		end = modrm(b, i, 0)
	case op >= 0x70 && op <= 0x7f, op == 0xeb:
		if prefixed || i+1 > len(b) {
			return s, false
		}
		return Step{Len: i + 1, Rel: int64(int8(b[i])), Branch: true}, true
	case op == 0xe8, op == 0xe9:
		if prefixed || i+4 > len(b) {
			return s, false
		}
		return Step{Len: i + 4, Rel: int64(int32(binary.LittleEndian.Uint32(b[i:]))), Branch: true}, true
	}
	if end < 0 || end > len(b) {
		return s, false
	}
	return Step{Len: end}, true
}

// fast0F is fast for the opcodes of the 0F map, whose byte is at
// b[i], after the prefixes seen (their bits) and a REX, with W where w. The SSE ones take the prefixes that select among their forms:
// where x86asm knows only some of those, only those.
func fast0F(b []byte, i int, seen uint8, w bool) (s Step, ok bool) {
	if i >= len(b) {
		return s, false
	}
	op := b[i]
	i++
	const sse = p66 | pF2 | pF3
	prefixed := seen != 0
	end := -1
	switch {
	case op >= 0x80 && op <= 0x8f:
		if prefixed || i+4 > len(b) {
			return s, false
		}
		return Step{Len: i + 4, Rel: int64(int32(binary.LittleEndian.Uint32(b[i:]))), Branch: true}, true
	case (op == 0x05 || op == 0x0b || op == 0xa2 || op == 0x31 || op >= 0xc8 && op <= 0xcf) && !prefixed:
		end = i
	case op >= 0x40 && op <= 0x4f, op >= 0x90 && op <= 0x9f,
		op == 0xa3, op == 0xab, op == 0xaf, op == 0xb3, op == 0xbb,
		op == 0xb6, op == 0xb7, op == 0xbe, op == 0xbf:
		if i >= len(b) || op >= 0x90 && op <= 0x9f && b[i]>>3&7 != 0 || seen&sse&^p66 != 0 {
			return s, false
		}
		end = modrm(b, i, 0)
	case op == 0xa4, op == 0xac, op == 0xba:
		if op == 0xba && (i >= len(b) || b[i]>>3&7 < 4) || seen&sse&^p66 != 0 {
			return s, false
		}
		end = modrm(b, i, 1)
	case op == 0xb0, op == 0xb1, op == 0xc0, op == 0xc1: // CMPXCHG, XADD
		if seen&sse != 0 {
			return s, false
		}
		end = modrm(b, i, 0)
	case op == 0x1f: // NOP r/m
		if i >= len(b) || b[i]>>3&7 != 0 || seen&^p66 != 0 || w {
			return s, false
		}
		end = modrm(b, i, 0)
	case op == 0x10, op == 0x11, op == 0x51, op == 0x58, op == 0x59, op >= 0x5c && op <= 0x5f:
		// MOVUPS, MOVUPD, MOVSS, MOVSD; SQRT, ADD, MUL, SUB, MIN, DIV,
		// MAX.
		if seen&pLock != 0 || seen&pF2 != 0 && seen&pF3 != 0 {
			return s, false
		}
		end = modrm(b, i, 0)
	case op == 0x28, op == 0x29, op == 0x2e, op == 0x2f, op >= 0x54 && op <= 0x57, op == 0xef:
		// MOVAPS, MOVAPD; UCOMIS, COMIS; AND, ANDN, OR, XOR; PXOR.
		if seen&^p66 != 0 {
			return s, false
		}
		end = modrm(b, i, 0)
	}
	if end < 0 || end > len(b) {
		return s, false
	}
	return Step{Len: end}, true
}

// modrm returns the end of the ModRM byte at b[i], with the SIB byte and
// displacement it implies, and imm bytes of immediate after them: -1
// where b is cut short of it.
func modrm(b []byte, i, imm int) int {
	if i >= len(b) {
		return -1
	}
	m := b[i]
	i++
	mod, rm := m>>6, m&7
	if mod != 3 && rm == 4 {
		if i >= len(b) {
			return -1
		}
		if mod == 0 && b[i]&7 == 5 {
			i += 4
		}
		i++
	}
	switch {
	case mod == 0 && rm == 5:
		i += 4
	case mod == 1:
		i++
	case mod == 2:
		i += 4
	}
	i += imm
	if i > len(b) {
		return -1
	}
	return i
}
