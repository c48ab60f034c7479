package x86step

import (
	"runtime"
	"testing"

	"github.com/go-usdt/usdt/internal/funcsites"
	"github.com/go-usdt/usdt/internal/testing/elftest"
)

// selfSymbols are the functions of this test's own executable, a real
// Go one.
func selfSymbols(t *testing.T) *funcsites.Symbols {
	syms, err := funcsites.NewSymbols(elftest.Self(t))
	if err != nil {
		t.Fatal(err)
	}
	return syms
}

// TestAgrees walks every function of this test's own executable, a
// real Go one (the runtime's assembly and cgo-free code of a few dozen
// packages), instruction by instruction as x86asm decodes them: where
// the table answers, its answer must be x86asm's, and it must answer
// most of them, or it saves nothing.
func TestAgrees(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("this test's executable is %s code, not amd64", runtime.GOARCH)
	}
	syms := selfSymbols(t)
	insts, byTable, funcs := 0, 0, 0
	for _, name := range syms.Names() {
		_, code, err := syms.Code(name)
		if err != nil {
			continue
		}
		funcs++
		for off := 0; off < len(code); {
			want, err := slow(code[off:])
			if err != nil {
				break // data in assembly, or VEX: the rest is not walked
			}
			insts++
			if got, ok := fast(code[off:]); ok {
				byTable++
				if got != want {
					t.Errorf("%s+%#x (% x): %+v, x86asm %+v", name, off, code[off:off+want.Len], got, want)
				}
			}
			off += want.Len
		}
	}
	t.Logf("%d instructions of %d functions: %d (%.1f %%) by the table", insts, funcs, byTable, 100*float64(byTable)/float64(insts))
	if insts < 100000 {
		t.Fatalf("walked %d instructions, want a real executable's 100,000 at least", insts)
	}
	if float64(byTable) < 0.8*float64(insts) {
		t.Errorf("the table answered %d of %d instructions, want 80 %% at least", byTable, insts)
	}
}

// FuzzRead reads an instruction of any bytes: where the table
// answers, x86asm must decode the same length and branch.
func FuzzRead(f *testing.F) {
	for _, seed := range [][]byte{
		{0x49, 0x3b, 0x66, 0x10},             // CMPQ SP, 16(R14)
		{0x76, 0x20},                         // JBE
		{0x0f, 0x86, 1, 2, 3, 4},             // JBE rel32
		{0xe8, 0, 0, 0, 0},                   // CALL
		{0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8}, // MOVQ $imm64, AX
		{0x66, 0x81, 0x7c, 0x24, 8, 1, 2},    // CMPW $imm16, 8(SP)
		{0xf3, 0x48, 0x0f, 0xb8, 0xc0},       // POPCNTQ
		{0x64, 0x48, 0x8b, 0x04, 0x25, 0xf8, 0xff, 0xff, 0xff},
		{0xc6, 0xf8, 1}, // XABORT
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		got, ok := fast(code)
		if !ok {
			return
		}
		want, err := slow(code)
		if err != nil {
			t.Fatalf("% x: the table reads %+v, x86asm: %v", code, got, err)
		}
		if got != want {
			t.Fatalf("% x: the table reads %+v, x86asm %+v", code, got, want)
		}
	})
}

// TestEncodings reads every opcode of the one-byte and 0F maps with
// every ModRM byte and both kinds of SIB byte, after each REX kind and
// each pair of the prefixes the table knows (it knows no more than two): where the table answers, its answer must be x86asm's.
func TestEncodings(t *testing.T) {
	prefixes := [][]byte{nil}
	known := []byte{0x66, 0xf2, 0xf3, 0xf0, 0x64, 0x65}
	for i, p := range known {
		prefixes = append(prefixes, []byte{p})
		for _, q := range known[i+1:] {
			prefixes = append(prefixes, []byte{p, q}, []byte{q, p})
		}
	}
	if testing.Short() {
		prefixes = prefixes[:7]
	}
	// After the ModRM byte, a SIB byte with a base register, and one
	// with none (a 32-bit displacement then), before the bytes of any
	// displacement and immediate.
	tails := [][]byte{
		{0x24, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa},
		{0x25, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa},
	}
	checked := 0
	code := make([]byte, 0, 32)
	for _, pre := range prefixes {
		for _, rex := range [][]byte{nil, {0x48}, {0x41}} {
			for op := range 512 {
				opcode := []byte{byte(op)}
				if op >= 256 {
					opcode = []byte{0x0f, byte(op)}
				}
				for m := range 256 {
					for _, tail := range tails {
						code = append(append(append(append(code[:0], pre...), rex...), opcode...), byte(m))
						code = append(code, tail...)
						got, ok := fast(code)
						if !ok {
							continue
						}
						checked++
						want, err := slow(code)
						if err != nil || got != want {
							t.Fatalf("% x: the table reads %+v, x86asm %+v (%v)", code, got, want, err)
						}
					}
				}
			}
		}
	}
	t.Logf("%d encodings checked", checked)
}
