package elfpatch

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

// The test program: package p owns the probe (a Plan9 NOP stub and a
// table whose asm DATA makes it file-backed in .noptrdata, with the
// semaphores at +8 and +10), main polls the semaphore and fires the probe
// only while it is non-zero, exactly like generated code.
const (
	magic = 0x1122334455667788

	goMod = "module example.com/probed\n\ngo 1.26\n"

	pGo = `package p

// table is declared here and filled by the assembly file: its DATA keeps it
// out of .noptrbss, so the semaphores are file-backed.
var table struct {
	magic uint64
	sema  [2]uint16
	pad   [2]uint16
}

//go:noescape
func stub(a int64)

func Enabled() bool { return table.sema[0] != 0 }

func Fire(a int64) { stub(a) }
`

	stubAMD64 = `#include "textflag.h"

TEXT ·stub(SB),NOSPLIT|NOFRAME,$0-8
	BYTE $0x90
	RET

DATA ·table+0(SB)/8, $0x1122334455667788
GLOBL ·table(SB), NOPTR, $16
`

	// arm64's NOP pseudo-instruction emits nothing: spell the instruction.
	stubARM64 = `#include "textflag.h"

TEXT ·stub(SB),NOSPLIT|NOFRAME,$0-8
	WORD $0xd503201f
	RET

DATA ·table+0(SB)/8, $0x1122334455667788
GLOBL ·table(SB), NOPTR, $16
`

	mainGo = `package main

import (
	"fmt"
	"os"
	"time"

	"example.com/probed/p"
)

// tick is replaced by the cgo variant to fire its C probe as well.
var tick = func() {}

func main() {
	run := 20 * time.Second
	if s := os.Getenv("PROBED_RUN"); s != "" {
		run, _ = time.ParseDuration(s)
	}
	var enabledAt time.Time
	for deadline := time.Now().Add(run); time.Now().Before(deadline); {
		if p.Enabled() {
			if enabledAt.IsZero() {
				fmt.Println("enabled")
				enabledAt = time.Now()
			}
			p.Fire(42)
			if time.Since(enabledAt) > 3*time.Second {
				return
			}
		}
		tick()
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("timeout")
}
`

	cgoGo = `package main

// void cprobe_fire(int x);
import "C"

func init() { tick = func() { C.cprobe_fire(7) } }
`

	// The C probe, from the real header, with a semaphore so that the
	// binary has its own .probes section, as dtrace -G output does.
	cprobeC = `#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short cprov_cfire_semaphore __attribute__((unused)) __attribute__((section(".probes")));

void cprobe_fire(int x) {
	if (cprov_cfire_semaphore)
		STAP_PROBE1(cprov, cfire, x);
}
`

	// The same probe in GNU assembler, for machines without
	// systemtap-sdt-dev.
	cprobeS = `	.text
	.globl	cprobe_fire
	.type	cprobe_fire, %function
cprobe_fire:
	nop
	ret
	.size	cprobe_fire, .-cprobe_fire

	.section .probes,"aw",%progbits
	.balign	2
	.globl	cprov_cfire_semaphore
cprov_cfire_semaphore:
	.2byte	0

	.section .stapsdt.base,"a",%progbits
cprobe_base:
	.byte	0

	.section .note.stapsdt,"",%note
	.balign	4
	.4byte	8, 2f-1f, 3
	.asciz	"stapsdt"
1:	.8byte	cprobe_fire, cprobe_base, cprov_cfire_semaphore
	.asciz	"cprov"
	.asciz	"cfire"
	.asciz	"-4@%edi"
2:	.balign	4

	.section .note.GNU-stack,"",%progbits
`
)

// variant is one way of building the test program.
type variant struct {
	name   string
	goarch string
	cgo    bool
	flags  []string
	args   string // the probe's argument spec at the stub's NOP
}

var (
	exeVariant      = variant{name: "exe", goarch: "amd64", args: "8@8(%rsp)"}
	pieVariant      = variant{name: "pie", goarch: "amd64", flags: []string{"-buildmode=pie"}, args: "8@8(%rsp)"}
	strippedVariant = variant{name: "stripped", goarch: "amd64", flags: []string{"-ldflags=-s -w"}, args: "8@8(%rsp)"}
	arm64Variant    = variant{name: "arm64", goarch: "arm64", args: "8@[sp, 8]"}
	cgoVariant      = variant{name: "cgo", goarch: "amd64", cgo: true, args: "8@8(%rsp)"}
	cgoPIEVariant   = variant{name: "cgo-pie", goarch: "amd64", cgo: true, flags: []string{"-buildmode=pie"}, args: "8@8(%rsp)"}
)

// built is a pristine test executable and what the test needs to know
// about it, found the way the toolexec wrapper would: from the pclntab and
// the data, not from a symbol table that -s removes.
type built struct {
	path      string
	pc        uint64 // the stub's NOP
	table     uint64 // &table; semaphores at +8 and +10
	hasCProbe bool
}

var (
	buildDir   string
	buildMu    sync.Mutex
	buildCache = map[string]*built{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "elfpatch-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build returns the variant's pristine executable, building it once per
// test process. It skips the test when the variant needs a missing tool.
func build(t *testing.T, v variant) *built {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("go command not on PATH: %v", err)
	}
	if v.cgo {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Skipf("gcc not on PATH (%v): cannot build the cgo variant", err)
		}
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := buildCache[v.name]; ok {
		if b == nil {
			t.Fatalf("building variant %s failed earlier", v.name)
		}
		return b
	}
	buildCache[v.name] = nil
	src := filepath.Join(buildDir, "src-"+v.name)
	files := map[string]string{
		"go.mod":         goMod,
		"main.go":        mainGo,
		"p/p.go":         pGo,
		"p/stub_amd64.s": stubAMD64,
		"p/stub_arm64.s": stubARM64,
	}
	hasC := false
	if v.cgo {
		files["cgo.go"] = cgoGo
		if haveSDTHeader() {
			files["cprobe.c"] = cprobeC
		} else {
			files["cprobe.S"] = cprobeS
		}
		hasC = true
	}
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(buildDir, v.name)
	args := append([]string{"build", "-o", out}, v.flags...)
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = src
	cgo := "0"
	if v.cgo {
		cgo = "1"
	}
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+v.goarch, "CGO_ENABLED="+cgo, "GOFLAGS=", "GOTOOLCHAIN=local")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	b := &built{path: out, hasCProbe: hasC}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b.pc = funcEntry(t, f, "example.com/probed/p.stub")
	b.table = findMagic(t, f)
	// Where a symbol table exists, it must agree with what was derived.
	if syms, err := f.Symbols(); err == nil {
		for _, s := range syms {
			if s.Name == "example.com/probed/p.stub.abi0" && s.Value != b.pc {
				t.Fatalf("pclntab says stub at %#x, symbol table %#x", b.pc, s.Value)
			}
			if s.Name == "example.com/probed/p.table" && s.Value != b.table {
				t.Fatalf("magic scan says table at %#x, symbol table %#x", b.table, s.Value)
			}
		}
	}
	buildCache[v.name] = b
	return b
}

// funcEntry finds a function's entry in the Go pclntab, which even a
// stripped (-s -w) binary keeps.
func funcEntry(t *testing.T, f *elf.File, name string) uint64 {
	t.Helper()
	pcln := f.Section(".gopclntab")
	text := f.Section(".text")
	if pcln == nil || text == nil {
		t.Fatal("no .gopclntab or .text section")
	}
	data, err := pcln.Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, textStart(f, text.Addr)))
	if err != nil {
		t.Fatal(err)
	}
	if fn := tab.LookupFunc(name); fn != nil {
		return fn.Entry
	}
	t.Fatalf("%s not in pclntab", name)
	return 0
}

// textStart is runtime.text, which the pclntab's function offsets count
// from. In an externally linked (cgo) binary C code comes first in .text,
// so .text's address is off; debug/gosym does not read the start from the
// table (Go 1.26 leaves that header field zero in the file anyway). The
// variants built here either have a symbol table or start .text with Go.
func textStart(f *elf.File, fallback uint64) uint64 {
	if syms, err := f.Symbols(); err == nil {
		for _, s := range syms {
			if s.Name == "runtime.text" {
				return s.Value
			}
		}
	}
	return fallback
}

// findMagic returns the address of the table by its initial value.
func findMagic(t *testing.T, f *elf.File) uint64 {
	t.Helper()
	s := f.Section(".noptrdata")
	if s == nil {
		t.Fatal("no .noptrdata section")
	}
	data, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	var m [8]byte
	binary.LittleEndian.PutUint64(m[:], magic)
	i := bytes.Index(data, m[:])
	if i < 0 || bytes.Contains(data[i+1:], m[:]) {
		t.Fatalf("magic value found %d times in .noptrdata, want once", bytes.Count(data, m[:]))
	}
	return s.Addr + uint64(i)
}

// haveSDTHeader reports whether <sys/sdt.h> is installed (Debian:
// systemtap-sdt-dev), asking the preprocessor rather than guessing paths.
func haveSDTHeader() bool {
	cmd := exec.Command("gcc", "-E", "-x", "c", "-o", os.DevNull, "-")
	cmd.Stdin = strings.NewReader("#include <sys/sdt.h>\n")
	return cmd.Run() == nil
}

// fresh copies the variant's pristine executable into the test's own
// directory, so each test patches its own file.
func fresh(t *testing.T, v variant) (string, *built) {
	t.Helper()
	b := build(t, v)
	data, err := os.ReadFile(b.path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "probed")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// sites is what the tests add: one probe with the first semaphore, and a
// second at the same pc with the second semaphore, so .probes spans both.
func (b *built) sites(v variant) []probe.Probe {
	return []probe.Probe{
		{Provider: "elfpatchtest", Name: "fire", Spec: v.args, PC: b.pc, Semaphore: b.table + 8},
		{Provider: "elfpatchtest", Name: "fire2", Spec: v.args, PC: b.pc, Semaphore: b.table + 10},
	}
}
