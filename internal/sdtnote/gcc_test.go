package sdtnote

import (
	"cmp"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A C program whose probe comes from the real <sys/sdt.h>, with a semaphore,
// so Read is checked against what the C toolchain emits.
const sdtC = `#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
unsigned short demo_fire_semaphore __attribute__((unused)) __attribute__((section(".probes")));
int main(int argc, char **argv) {
	STAP_PROBE2(demo, fire, argc, argv);
	return 0;
}
`

// The same facts written by hand with GNU assembler directives, for machines
// without systemtap-sdt-dev: here the PC is a known symbol.
const sdtS = `	.text
	.globl	demo_site
	.type	demo_site, %function
demo_site:
	nop
	ret
	.size	demo_site, .-demo_site

	.section .probes,"aw",%progbits
	.balign	2
	.globl	demo_sema
demo_sema:
	.2byte	0

	.section .stapsdt.base,"a",%progbits
demo_base:
	.byte	0

	.section .note.stapsdt,"",%note
	.balign	4
	.4byte	8, 2f-1f, 3
	.asciz	"stapsdt"
1:	.8byte	demo_site, demo_base, demo_sema
	.asciz	"demo"
	.asciz	"site"
	.asciz	"8@%rdi"
2:	.balign	4

	.section .note.GNU-stack,"",%progbits
`

// sdtStackC's probe reads its arguments from the stack: arm64 GCC writes
// them as memory operands with a blank inside ("-4@[sp, 4]").
const sdtStackC = `#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
unsigned short demo_stack_semaphore __attribute__((unused)) __attribute__((section(".probes")));
int main(int argc, char **argv) {
	volatile int a = argc, b = argc * 2, c = argc * 3;
	STAP_PROBE3(demo, stack, a, b, c);
	return 0;
}
`

const mainC = `extern void demo_site(void);
int main(void) { demo_site(); return 0; }
`

// sdtHeaderDir returns the include directory of <sys/sdt.h> (Debian:
// systemtap-sdt-dev), asking the preprocessor rather than guessing paths,
// or "" when it is not installed. The header does not depend on the
// architecture: a cross compiler, which does not search the host's
// directories, is given this one.
func sdtHeaderDir() string {
	cmd := exec.Command("gcc", "-M", "-x", "c", "-")
	cmd.Stdin = strings.NewReader("#include <sys/sdt.h>\n")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(out)) {
		if dir, ok := strings.CutSuffix(f, "/sys/sdt.h"); ok {
			return dir
		}
	}
	return ""
}

func TestReadGCCBinary(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skipf("gcc not found (%v): cannot build a C binary with stapsdt notes", err)
	}
	tests := []struct {
		name     string
		cc       string // the C compiler; gcc when empty
		files    map[string]string
		needSDT  bool
		provider string
		probe    string
		args     string // exact, or "" to only count arguments
		nargs    int
		pcSym    string // symbol the PC must equal, or "" for "inside .text"
		semaSym  string
	}{
		{name: "sys/sdt.h", files: map[string]string{"main.c": sdtC}, needSDT: true,
			provider: "demo", probe: "fire", nargs: 2, semaSym: "demo_fire_semaphore"},
		{name: "assembler", files: map[string]string{"main.c": mainC, "probe.S": sdtS},
			provider: "demo", probe: "site", args: "8@%rdi", nargs: 1, pcSym: "demo_site", semaSym: "demo_sema"},
		{name: "sys/sdt.h arm64 stack", cc: "aarch64-linux-gnu-gcc", files: map[string]string{"main.c": sdtStackC}, needSDT: true,
			provider: "demo", probe: "stack", nargs: 3, semaSym: "demo_stack_semaphore"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cc := cmp.Or(tc.cc, "gcc")
			if _, err := exec.LookPath(cc); err != nil {
				t.Skipf("%s not found (%v; Debian package gcc-aarch64-linux-gnu)", cc, err)
			}
			dir := t.TempDir()
			args := []string{"-O2", "-o", filepath.Join(dir, "bin")}
			if tc.needSDT {
				inc := sdtHeaderDir()
				if inc == "" {
					t.Skip("<sys/sdt.h> not installed (Debian package systemtap-sdt-dev); the assembler case covers the format")
				}
				args = append(args, "-idirafter", inc)
			}
			for name, src := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, p)
			}
			if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
			}
			f, err := elf.Open(filepath.Join(dir, "bin"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			notes, err := Read(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(notes) != 1 {
				t.Fatalf("Read returned %d notes, want 1: %+v", len(notes), notes)
			}
			n := notes[0]
			if n.Provider != tc.provider || n.Name != tc.probe {
				t.Errorf("probe %s:%s, want %s:%s", n.Provider, n.Name, tc.provider, tc.probe)
			}
			if tc.args != "" && n.Args != tc.args {
				t.Errorf("args %q, want %q", n.Args, tc.args)
			}
			if got := len(SplitArgs(n.Args)); got != tc.nargs || strings.Count(n.Args, "@") != tc.nargs {
				t.Errorf("args %q: want %d N@OP arguments", n.Args, tc.nargs)
			}
			syms := symbols(t, f)
			if tc.pcSym != "" {
				if n.PC != syms[tc.pcSym] {
					t.Errorf("pc %#x, want %s = %#x", n.PC, tc.pcSym, syms[tc.pcSym])
				}
			} else if text := f.Section(".text"); text == nil || n.PC < text.Addr || n.PC >= text.Addr+text.Size {
				t.Errorf("pc %#x is not inside .text", n.PC)
			}
			if n.Semaphore == 0 || n.Semaphore != syms[tc.semaSym] {
				t.Errorf("semaphore %#x, want %s = %#x", n.Semaphore, tc.semaSym, syms[tc.semaSym])
			}
			base := f.Section(".stapsdt.base")
			if base == nil {
				t.Fatal("binary has no .stapsdt.base section")
			}
			if n.Base == 0 || n.Base != base.Addr {
				t.Errorf("base %#x, want .stapsdt.base address %#x", n.Base, base.Addr)
			}
		})
	}
}

func symbols(t *testing.T, f *elf.File) map[string]uint64 {
	t.Helper()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]uint64, len(syms))
	for _, s := range syms {
		m[s.Name] = s.Value
	}
	return m
}
