package trace

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadBias reads where a process mapped the executable from maps
// files as the kernel writes them: one that maps it gives the bias; one
// caught between exec and the executable's mapping (only the stack) says
// so, for the caller to ask again; an exited process's empty maps is an
// error of its own.
func TestLoadBias(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var text *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			text = p
			break
		}
	}
	if text == nil {
		t.Fatalf("%s has no executable segment", exe)
	}
	const bias = 0x7f0000000000
	start := bias + text.Vaddr - text.Off
	stack := "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n"
	mapped := fmt.Sprintf("%x-%x r-xp %08x 00:00 1 %s\n", start, start+text.Filesz, text.Off, exe) + stack
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if got, err := loadBias(f, exe, write("mapped", mapped)); err != nil || got != bias {
		t.Errorf("mapped: bias %#x, %v; want %#x", got, err, uint64(bias))
	}
	if _, err := loadBias(f, exe, write("exec", stack)); !errors.Is(err, errNotYetMapped) {
		t.Errorf("only the stack mapped: %v, want errNotYetMapped", err)
	}
	if _, err := loadBias(f, exe, write("exited", "")); err == nil || errors.Is(err, errNotYetMapped) {
		t.Errorf("empty maps: %v, want an error other than errNotYetMapped", err)
	}
}
