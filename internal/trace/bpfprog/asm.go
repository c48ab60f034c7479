package bpfprog

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

// reloadProgram closes old, if any, and loads insns as a uprobe program,
// for uprobe_multi links or for single uprobes: the kernel checks the
// attach type a program was loaded with.
func reloadProgram(old *ebpf.Program, name string, insns asm.Instructions, multi bool) (*ebpf.Program, error) {
	if old != nil {
		old.Close()
	}
	spec := &ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.Kprobe,
		License:      "GPL", // bpf_probe_read_user_str and friends are GPL-only
		Instructions: insns,
	}
	if multi {
		spec.AttachType = ebpf.AttachTraceUprobeMulti
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return nil, fmt.Errorf("loading the BPF program: %w", err)
	}
	return prog, nil
}

// Instruction sequences the event and the -stats programs share. Both end
// at the label "out".

// siteEntry looks the site of the probe that fired up in the array m,
// under its index, which it stores at slot of the stack; R6 holds the
// context. R0 is the entry's address after, and without one the program
// ends. The index is the uprobe's BPF cookie where the kernel has them
// (Linux 5.15); before that, byIP maps the address the probe fired at to
// it (see newSiteIPs): the kernel sets the instruction pointer of the
// pt_regs it hands a uprobe's handlers to the breakpoint's address.
func siteEntry(m int, byIP *ebpf.Map, slot int16) asm.Instructions {
	if byIP == nil {
		return append(asm.Instructions{
			asm.Mov.Reg(asm.R1, rCtx),
			asm.FnGetAttachCookie.Call(),
		}, lookupKey(m, asm.R0, slot)...)
	}
	const ipSlot = -16
	return append(asm.Instructions{
		asm.LoadMem(asm.R1, rCtx, int16(ptRegs[runtime.GOARCH][ipRegister[runtime.GOARCH]]), asm.DWord),
		asm.StoreMem(asm.RFP, ipSlot, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, byIP.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, ipSlot),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
	}, lookupKey(m, asm.R1, slot)...)
}

// ipRegister and spRegister name the instruction and the stack pointer in
// ptRegs, per GOARCH.
var (
	ipRegister = map[string]string{"amd64": "rip", "arm64": "pc"}
	spRegister = map[string]string{"amd64": "rsp", "arm64": "sp"}
)

// HaveCookies reports whether uprobes carry a BPF cookie here
// (bpf_get_attach_cookie, Linux 5.15), by which the programs know which
// site fired.
var HaveCookies = sync.OnceValue(func() bool {
	return features.HaveProgramHelper(ebpf.Kprobe, asm.FnGetAttachCookie) == nil
})

// newSiteIPs returns, on a kernel without BPF cookies, the map from each
// site's address to its index that siteEntry then looks the site up in;
// nil on a kernel with them. The addresses are those of the executable
// itself, which is why such kernels trace only executables that are not
// position-independent.
func newSiteIPs(addrs []uint64) (*ebpf.Map, error) {
	if HaveCookies() {
		return nil, nil
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_site_ips", Type: ebpf.Hash, KeySize: 8, ValueSize: 4, MaxEntries: uint32(max(len(addrs), 1))})
	if err != nil {
		return nil, err
	}
	for i, addr := range addrs {
		if err := m.Update(addr, uint32(i), ebpf.UpdateAny); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// lookupKey looks the u32 in the register key up in the map m, storing it
// at slot of the stack. R0 is the element's address after, and without
// one the program ends.
func lookupKey(m int, key asm.Register, slot int16) asm.Instructions {
	return asm.Instructions{
		asm.StoreMem(asm.RFP, slot, key, asm.Word),
		asm.LoadMapPtr(asm.R1, m),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(slot)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
	}
}

// putArg writes where a is as readArg reads it, at the start of b: where
// u8 (whereReg, whereMem or whereConst), regOff u16 at 2, disp s64 at 8.
// The bytes between are the caller's.
func putArg(b []byte, a Arg) {
	switch {
	case a.Const:
		b[0] = whereConst
	case a.Deref:
		b[0] = whereMem
	default:
		b[0] = whereReg
	}
	le.PutUint16(b[2:], a.RegOff)
	le.PutUint64(b[8:], uint64(a.Disp))
}

// readArg reads an argument into dst, as the 16 bytes at off of the
// register spec say (where u8: whereReg, whereMem or whereConst, pad u8,
// regOff u16, pad u32, disp s64), through slot of the stack (8 bytes); R6
// holds the context. Its last instruction is at label.
func readArg(spec asm.Register, off, slot int16, dst asm.Register, label string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, slot, asm.R1, asm.DWord),
		// pt_regs is read through a helper: the verifier allows no
		// variable offsets into the context.
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, int32(slot)),
		asm.Mov.Imm(asm.R2, 8),
		asm.LoadMem(asm.R3, spec, off+2, asm.Half),
		asm.Add.Reg(asm.R3, rCtx),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(asm.R1, spec, off, asm.Byte),
		asm.JNE.Imm(asm.R1, whereConst, label+"_notconst"),
		asm.LoadMem(asm.R1, spec, off+8, asm.DWord),
		asm.StoreMem(asm.RFP, slot, asm.R1, asm.DWord),
		asm.Ja.Label(label),
		asm.JNE.Imm(asm.R1, whereMem, label).WithSymbol(label + "_notconst"),
		asm.LoadMem(asm.R3, asm.RFP, slot, asm.DWord),
		asm.LoadMem(asm.R1, spec, off+8, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R1),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, int32(slot)),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadUser.Call(),
		asm.LoadMem(dst, asm.RFP, slot, asm.DWord).WithSymbol(label),
	}
}

var le = binary.LittleEndian

// fillArray sets elements 0 to n-1 of the array m to value(i), in one
// batch where the kernel has them (5.6+): an update per element took a
// fifth of trace's start-up at 14,600 sites.
func fillArray(m *ebpf.Map, n int, value func(i int) []byte) error {
	if n == 0 {
		return nil
	}
	keys := make([]uint32, n)
	var vals []byte
	for i := range n {
		keys[i] = uint32(i)
		vals = append(vals, value(i)...)
	}
	if _, err := m.BatchUpdate(keys, vals, nil); err == nil {
		return nil
	}
	size := len(vals) / n
	for i := range n {
		if err := m.Update(keys[i], vals[i*size:(i+1)*size], ebpf.UpdateAny); err != nil {
			return err
		}
	}
	return nil
}
