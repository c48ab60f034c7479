package sdtnote

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// FuzzParse reads the .note.stapsdt section of a binary nobody vouches
// for, as list, bt and trace do: whatever its bytes, Read's parser
// returns notes or an error, never panics, and the notes it returns of a
// 64-bit file encode back (Encode) to bytes it reads as the same notes.
// Each note's arguments split (SplitArgs) into operands without blanks
// around them (but at the end of the last, whose bracket may not be
// closed, which the spec parser then refuses).
//
// The seed corpus in testdata/fuzz/FuzzParse holds the sections of real
// binaries: a C program built with sys/sdt.h by gcc for amd64 (with a
// semaphore) and for arm64 (stack operands), the usdtgen example
// (examples/provider) and the automatic probes of examples/toolexec, both
// built by usdt-toolexec.
func FuzzParse(f *testing.F) {
	f.Add(Encode([]Note{{Provider: "p", Name: "n", Args: "-8@%rdi 4@[sp, 16]", PC: 0x401000, Base: 0x402000, Semaphore: 0x403000}}, binary.LittleEndian), false, false)
	f.Add(append(gnuNote(binary.BigEndian), Encode([]Note{{Provider: "p", Name: "n"}}, binary.BigEndian)...), true, false)
	f.Add(encode32([]Note{{Provider: "p", Name: "n", Args: "4@%eax", PC: 0x8048000}}, binary.LittleEndian), false, true)
	f.Fuzz(func(t *testing.T, data []byte, bigEndian, addr32 bool) {
		var order binary.ByteOrder = binary.LittleEndian
		if bigEndian {
			order = binary.BigEndian
		}
		addrSize := 8
		if addr32 {
			addrSize = 4
		}
		notes, err := parse(data, order, addrSize)
		if err != nil {
			return
		}
		for _, n := range notes {
			ops := SplitArgs(n.Args)
			for i, op := range ops {
				// A blank ends an operand, but inside brackets: only
				// the last, whose bracket may not be closed, may end
				// in one.
				last := i == len(ops)-1
				if op == "" || op[0] == ' ' || !last && op[len(op)-1] == ' ' {
					t.Errorf("SplitArgs(%q) gives the operand %q", n.Args, op)
				}
			}
		}
		if addr32 {
			return
		}
		again, err := parse(Encode(notes, order.(binary.AppendByteOrder)), order, addrSize)
		if err != nil {
			t.Fatalf("the notes read of %q do not read back once encoded: %v", data, err)
		}
		if len(notes) > 0 && !reflect.DeepEqual(again, notes) {
			t.Errorf("notes %+v read back as %+v", notes, again)
		}
	})
}
