package trace

import (
	"bytes"
	"debug/elf"
	"errors"
	"runtime"

	"golang.org/x/sys/unix"
)

// nopPair is an amd64 probe site as usdtgen, usdt-toolexec and upstream's
// usdt.h write it: the 1-byte NOP the note points at, which every kernel
// emulates, then a 5-byte NOP, which a kernel that optimizes uprobes turns
// into a call to a trampoline, no trap at all.
var nopPair = []byte{0x90, 0x0f, 0x1f, 0x44, 0x00, 0x00}

// isNopPair reports whether the instruction at addr of f starts a nopPair.
func isNopPair(f *elf.File, addr uint64) bool {
	if f.Machine != elf.EM_X86_64 {
		return false
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr+uint64(len(nopPair)) <= p.Vaddr+p.Filesz {
			b := make([]byte, len(nopPair))
			_, err := p.ReadAt(b, int64(addr-p.Vaddr))
			return err == nil && bytes.Equal(b, nopPair)
		}
	}
	return false
}

// sysUprobe is the x86-64 uprobe syscall (Linux 6.18), through which the
// trampolines of optimized uprobes enter the kernel.
const sysUprobe = 336

// kernelOptimizesUprobes reports whether this kernel optimizes a uprobe
// on a 5-byte NOP. It asks the syscall itself, as libbpf does: called from
// outside a trampoline it fails with ENXIO, where a kernel without it
// knows no such call (ENOSYS).
func kernelOptimizesUprobes() bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	_, _, errno := unix.Syscall(sysUprobe, 0, 0, 0)
	return errors.Is(errno, unix.ENXIO)
}

// atNop5 moves the sites that are a nopPair to its 5-byte NOP when
// optimize says the kernel optimizes it, and says, for -v, where the
// sites are attached.
func atNop5(sites []site, optimize bool) string {
	pairs := 0
	for i := range sites {
		if sites[i].nopPair {
			pairs++
			if optimize {
				sites[i].offset++
			}
		}
	}
	switch {
	case pairs == 0:
		return "at the notes' addresses"
	case optimize:
		return "at the 5-byte NOPs after the notes' addresses (this kernel optimizes uprobes there)"
	}
	return "at the notes' 1-byte NOPs (this kernel does not optimize uprobes)"
}
