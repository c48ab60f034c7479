package funcsites

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// prog has functions of every prologue the compiler gives: none (a leaf),
// the short stack check, the one for frames larger than the stack guard,
// and several returns.
const prog = `package main

import "os"

//go:noinline
func leaf(a, b int) int { return a + b }

//go:noinline
func small(s []int) int {
	if len(s) == 0 {
		return -1
	}
	os.Stdout.WriteString("x")
	return s[0]
}

//go:noinline
func big(n int) byte {
	var buf [20000]byte
	for i := range buf {
		buf[i] = byte(i * n)
	}
	os.Stdout.Write(buf[:1])
	return buf[n%len(buf)]
}

//go:noinline
func returns(n int) string {
	switch n {
	case 0:
		return "zero"
	case 1:
		return leafString()
	}
	os.Stdout.WriteString("many")
	return "many"
}

//go:noinline
func leafString() string { return "one" }

// bits compiles to VEX-encoded instructions with GOAMD64=v3 (ANDN, SHLX),
// which the decoder does not know.
//
//go:noinline
func bits(x, y uint64, n uint) uint64 {
	if n > 64 {
		return 0
	}
	return (x &^ y) << (n & 63)
}

func main() { println(leaf(1, 2), small(nil), big(3), returns(4), bits(7, 2, 3)) }
`

var funcs = []string{"main.leaf", "main.small", "main.big", "main.returns", "main.leafString", "main.bits"}

// TestFind checks the sites of real functions against go tool objdump
// (binutils' objdump for GOAMD64=v3, whose VEX instructions go tool
// objdump does not decode):
// the entry is the instruction after the stack check's branch to
// runtime.morestack (JBE, BLS), or the first one without a check, and
// the returns are its RETs. Stripped executables find their functions in
// .gopclntab.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "amd64.v3", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			// The stripped executable has the same code at the same
			// addresses, which objdump reads only with symbols.
			bin := filepath.Join(dir, arch)
			build(t, dir, arch, "", bin)
			want := objdump(t, bin)
			if arch == "amd64.v3" {
				// go tool objdump does not decode VEX either: binutils'
				// objdump does.
				want = gnuObjdump(t, bin)
				if !strings.Contains(want["main.bits"].text, "andn") {
					t.Fatal("with GOAMD64=v3, main.bits has no ANDN: the test no longer meets a VEX instruction")
				}
			}
			for _, b := range []string{bin, build(t, dir, arch, "-s -w", bin+".stripped")} {
				f, err := elf.Open(b)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				syms, err := NewSymbols(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range funcs {
					got, err := syms.Find(name)
					if err != nil {
						t.Fatalf("%s: %s: %v", b, name, err)
					}
					if w := want[name]; got.Entry != w.Entry || !slices.Equal(got.Returns, w.Returns) || len(got.Returns) == 0 {
						t.Errorf("%s: %s: entry %#x, returns %#x; objdump says %#x, %#x", b, name, got.Entry, got.Returns, w.Entry, w.Returns)
					}
				}
				// The leaves have no stack check; the others have one.
				for name, checked := range map[string]bool{"main.leaf": false, "main.leafString": false, "main.small": true, "main.big": true, "main.returns": true} {
					if got, _ := syms.Find(name); (got.Entry != syms.funcs[name][0]) != checked {
						t.Errorf("%s: %s: entry %#x, function at %#x: a stack check is %v", b, name, got.Entry, syms.funcs[name][0], checked)
					}
				}
				if _, err := syms.Find("main.nothere"); err != ErrNoFunction {
					t.Errorf("%s: a missing function: %v, want ErrNoFunction", b, err)
				}
			}
		})
	}
}

// build builds prog for arch, "amd64.v3" meaning GOAMD64=v3.
func build(t *testing.T, dir, arch, ldflags, bin string) string {
	cmd := exec.Command("go", "build", "-ldflags="+ldflags, "-o", bin, "main.go")
	cmd.Dir = dir
	goarch, level, _ := strings.Cut(arch, ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "GOAMD64="+level, "CGO_ENABLED=0", "GO111MODULE=off")
	if level == "" {
		cmd.Env = append(cmd.Env, "GOAMD64=v1")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// listed is a function's sites as a disassembler lists them, and for
// binutils' objdump the listing.
type listed struct {
	Sites
	text string
}

// gnuObjdump reads the sites of funcs from binutils' objdump.
func gnuObjdump(t *testing.T, bin string) map[string]listed {
	tracetest.Require(t, "objdump")
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", bin).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	sites := map[string]listed{}
	head := regexp.MustCompile(`^[0-9a-f]+ <(main\.[^>]+)>:$`)
	inst := regexp.MustCompile(`^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$`)
	var name string
	var l listed
	n, checked, afterBranch := 0, false, false
	flush := func() {
		if name != "" {
			sites[name] = l
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			flush()
			name, l, n, checked, afterBranch = m[1], listed{}, 0, false, false
			continue
		}
		m := inst.FindStringSubmatch(line)
		if m == nil || name == "" {
			if line == "" {
				flush()
				name = ""
			}
			continue
		}
		addr, _ := strconv.ParseUint(m[1], 16, 64)
		l.text += line + "\n"
		if n == 0 || afterBranch {
			l.Entry, afterBranch = addr, false
		}
		n++
		switch {
		case n <= stackCheckWindow && m[2] == "cmp" && strings.Contains(m[3], "0x10(%r14)"):
			checked = true
		case checked && m[2] == "jbe":
			checked, afterBranch = false, true
		case m[2] == "ret":
			l.Returns = append(l.Returns, addr)
		}
	}
	flush()
	return sites
}

// objdump reads the sites of funcs from go tool objdump's listing.
func objdump(t *testing.T, bin string) map[string]listed {
	out, err := exec.Command("go", "tool", "objdump", "-s", `^main\.`, bin).Output()
	if err != nil {
		t.Fatalf("go tool objdump: %v", err)
	}
	sites := map[string]listed{}
	var name string
	var s Sites
	n, checked, afterBranch := 0, false, false
	flush := func() {
		if name != "" {
			sites[name] = listed{Sites: s}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "TEXT "); ok {
			flush()
			name, s, n, checked, afterBranch = strings.TrimSuffix(strings.Fields(rest)[0], "(SB)"), Sites{}, 0, false, false
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(fields[1], "0x"), 16, 64)
		if err != nil {
			continue
		}
		if n == 0 || afterBranch {
			s.Entry, afterBranch = addr, false
		}
		n++
		switch op := fields[3]; {
		case n <= stackCheckWindow && (strings.Contains(line, "0x10(R14)") || strings.Contains(line, "16(R28)")):
			checked = true
		case checked && (op == "JBE" || op == "BLS"):
			checked, afterBranch = false, true
		case op == "RET":
			s.Returns = append(s.Returns, addr)
		}
	}
	flush()
	return sites
}
