package textpatch

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/go-usdt/usdt/internal/funcsites"
)

// TestPlanEveryFunction plans switching every function of this test
// binary to plainF, and checks each plan against the file: its writes
// replace the bytes the file holds, each with an instruction of the
// same length (the CALL's JMP, reaching the target) or one byte inside
// one (the bound's displacement). Functions refused are refused for
// their code, never for an error in reading it.
func TestPlanEveryFunction(t *testing.T) {
	testPlanAll(t, self(t))
}

func testPlanAll(t *testing.T, exe string) {
	f := openELF(t, exe)
	// The names a Planner knows: the symbol table's (whose assembly
	// functions end in .abi0), or .gopclntab's.
	var names []string
	if syms, err := f.Symbols(); err == nil {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 {
				names = append(names, s.Name)
			}
		}
	} else {
		table, err := funcsites.GoTable(f)
		if err != nil || table == nil {
			t.Fatal(table, err)
		}
		for _, fn := range table.Funcs {
			names = append(names, fn.Name)
		}
	}
	pl, err := NewPlanner(f)
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	fileBytes := func(addr uint64, n int) []byte {
		b := make([]byte, n)
		if _, err := text.ReadAt(b, int64(addr-text.Addr)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	planned, why := 0, map[string]int{}
	for _, name := range names {
		p, err := pl.Plan(name, pkgPath+"plainF")
		if err != nil {
			if !errors.Is(err, ErrUnswitchable) {
				t.Errorf("%s: %v", name, err)
				continue
			}
			msg := err.Error()
			msg = msg[strings.LastIndex(msg, ": ")+2:]
			if i := strings.Index(msg, " at +"); i > 0 {
				msg = msg[:i] + " at ..."
			}
			if strings.Contains(msg, "does not decode") {
				t.Errorf("%s: %v", name, err)
			}
			why[msg]++
			continue
		}
		planned++
		for _, w := range p.Writes {
			if got := fileBytes(w.At, len(w.Old)); !bytes.Equal(got, w.Old) {
				t.Fatalf("%s: write at %#x: old % x, file % x", name, w.At, w.Old, got)
			}
		}
		switch f.Machine {
		case elf.EM_X86_64:
			jmp, bound := p.Writes[0], p.Writes[1]
			inst, err := x86asm.Decode(jmp.New, 64)
			if err != nil || inst.Op != x86asm.JMP || inst.Len != len(jmp.Old) {
				t.Fatalf("%s: % x: %v %v", name, jmp.New, inst, err)
			}
			if to := jmp.At + 5 + uint64(int64(inst.Args[0].(x86asm.Rel))); to != p.Target {
				t.Fatalf("%s: jumps to %#x, want %#x", name, to, p.Target)
			}
			old, _ := x86asm.Decode(fileBytes(bound.At-3, 4), 64)
			whole := append(fileBytes(bound.At-3, 3), bound.New...)
			now, _ := x86asm.Decode(whole, 64)
			if old.Len != 4 || now.Len != 4 || now.Op != x86asm.CMP || now.Args[1].(x86asm.Mem).Disp != 8 {
				t.Fatalf("%s: the bound %v became %v", name, old, now)
			}
		case elf.EM_AARCH64:
			w := p.Writes[0]
			inst, err := arm64asm.Decode(w.New)
			if err != nil || inst.Op != arm64asm.B {
				t.Fatalf("%s: % x: %v %v", name, w.New, inst, err)
			}
			if to := w.At + uint64(int64(inst.Args[0].(arm64asm.PCRel))); to != p.Target {
				t.Fatalf("%s: branches to %#x, want %#x", name, to, p.Target)
			}
		}
	}
	if planned == 0 {
		t.Fatal("no function planned")
	}
	var reasons []string
	for r, n := range why {
		reasons = append(reasons, fmt.Sprintf("%6d %s", n, r))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(reasons)))
	t.Logf("%s: %d of %d functions can be switched; the others:\n%s", filepath.Base(exe), planned, len(names), strings.Join(reasons, "\n"))
}

// TestPlanARM64 builds this package's tests for arm64 and plans every
// function of that binary: each switch is one B that reaches its target.
func TestPlanARM64(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary")
	}
	exe := filepath.Join(t.TempDir(), "textpatch.test")
	cmd := exec.Command("go", "test", "-c", "-o", exe, ".")
	cmd.Env = append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	testPlanAll(t, exe)
}
