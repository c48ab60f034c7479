package trace

import (
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"runtime"

	"golang.org/x/sys/unix"
)

// nopPair is an amd64 probe site as usdtgen, usdt-toolexec and upstream's
// usdt.h write it: the 1-byte NOP the note points at, which every kernel
// emulates, then a 5-byte NOP, which a kernel that optimizes uprobes turns
// into a call to a trampoline, no trap at all.
var nopPair = []byte{0x90, 0x0f, 0x1f, 0x44, 0x00, 0x00}

// nopPairs reports, for each address of f, whether the instruction there
// starts a nopPair. Each segment the addresses are in is read once: a read
// per site took a tenth of trace's start-up at 14,600 sites.
func nopPairs(f *elf.File, addrs []uint64) []bool {
	is := make([]bool, len(addrs))
	if f.Machine != elf.EM_X86_64 {
		return is
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		var data []byte
		for i, addr := range addrs {
			if addr < p.Vaddr || addr-p.Vaddr >= p.Filesz {
				continue
			}
			if data == nil {
				// What the file holds of the segment: a damaged
				// header may claim any size.
				var err error
				if data, err = io.ReadAll(p.Open()); err != nil || len(data) == 0 {
					break
				}
			}
			if at := addr - p.Vaddr; at+uint64(len(nopPair)) <= uint64(len(data)) {
				is[i] = bytes.Equal(data[at:at+uint64(len(nopPair))], nopPair)
			}
		}
	}
	return is
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
