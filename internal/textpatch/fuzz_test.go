package textpatch

import (
	"bytes"
	"testing"
)

// FuzzPlanCode plans a switch of a function whose code is any bytes, as
// a damaged or hostile executable's may be: a plan or an error, never a
// panic; and a plan's writes lie inside the code, each replacing the
// bytes the code holds there by as many. The seeds are Go's prologues:
// the stack check and its morestack tail as amd64 and arm64 compile them.
func FuzzPlanCode(f *testing.F) {
	const entry, morestack = 0x401000, 0x400000
	amd64 := []byte{
		0x49, 0x3b, 0x66, 0x10, // CMPQ SP, 16(R14)
		0x76, 0x06, // JBE +6
		0x90, 0x90, 0x90, 0x90, 0xc3, 0x90, // body, RET
		0x48, 0x89, 0x44, 0x24, 0x08, // MOVQ AX, 8(SP)
		0xe8, 0, 0, 0, 0, // CALL runtime.morestack_noctxt, patched below
		0xeb, 0xe8, // JMP entry
	}
	rel := int32(morestack - (entry + 17 + 5))
	amd64[18], amd64[19], amd64[20], amd64[21] = byte(rel), byte(rel>>8), byte(rel>>16), byte(rel>>24)
	f.Add(amd64, false)
	f.Add(amd64[:17], false)
	f.Add([]byte{0x4c, 0x8d, 0x64, 0x24, 0xd8, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0, 0, 0, 0}, false)
	f.Add([]byte{0x90, 0x0b, 0x40, 0xf9, 0xff, 0x63, 0x30, 0xeb, 0x09, 0x01, 0x00, 0x54}, true)
	f.Add([]byte{0x00, 0x00, 0x20, 0xd4}, true)
	f.Fuzz(func(t *testing.T, code []byte, arm bool) {
		p := &Planner{morestack: morestack}
		pt := Patch{Func: "f", To: "g", Entry: entry, Target: 0x402000}
		var err error
		if arm {
			err = planARM64(&pt, code)
		} else {
			err = p.planAMD64(&pt, code)
		}
		if err != nil {
			return
		}
		if len(pt.Writes) == 0 {
			t.Fatal("a plan with no writes")
		}
		for _, w := range pt.Writes {
			off := int(w.At - entry)
			if w.At < entry || off+len(w.Old) > len(code) || len(w.New) != len(w.Old) || !bytes.Equal(code[off:off+len(w.Old)], w.Old) {
				t.Fatalf("write at +%d of % x over % x: not the code's bytes", off, w.New, w.Old)
			}
		}
	})
}
