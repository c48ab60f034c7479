package bpfprog

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// With -- CMD, only the command and what it starts are traced, though the
// probes fire in every process of the binary. The tasks map holds the
// thread ids of the command's tasks: two tracepoint programs keep it, one
// on sched_process_fork that adds every task a task in the map creates
// (threads and processes alike, before the new task runs), one on
// sched_process_exit that removes a task as it ends, so that an id the
// kernel hands out again does not stay in. The probe program drops the
// events of threads not in the map. Thread ids rather than process ids:
// the fork tracepoint names the new task by its thread id, and cannot
// tell a thread from a process. The ids are the initial PID namespace's,
// which bpf_get_current_pid_tgid and the tracepoint report.
//
// The command is seeded in by the tracer's thread that starts it: that
// thread is in the map while it forks, so the command is in from its
// first instruction. A thread the Go runtime starts from it meanwhile
// stays in, harmlessly: it runs the tracer, not the traced binary.

// maxTasks bounds the command's live threads and processes that are
// traced: past it, new ones are not.
const maxTasks = 1 << 14

// Tasks are the tasks map and the programs that keep it.
type Tasks struct {
	m     *ebpf.Map
	progs []*ebpf.Program
	links []link.Link
}

// Close detaches the programs and closes them and the map.
func (t *Tasks) Close() {
	if t == nil {
		return
	}
	for _, l := range t.links {
		l.Close()
	}
	for _, p := range t.progs {
		p.Close()
	}
	if t.m != nil {
		t.m.Close()
	}
}

// NewTasks makes the tasks map, and has the tracepoint programs keep it.
func NewTasks() (*Tasks, error) {
	off, err := tracepointField("sched", "sched_process_fork", "child_pid")
	if err != nil {
		return nil, err
	}
	t := new(Tasks)
	if t.m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "usdt_tasks", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: maxTasks}); err != nil {
		return nil, err
	}
	for _, tp := range []struct {
		event, name string
		insns       asm.Instructions
	}{
		{"sched_process_fork", "usdt_fork", forkProgram(t.m.FD(), off)},
		{"sched_process_exit", "usdt_exit", exitProgram(t.m.FD())},
	} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: tp.name, Type: ebpf.TracePoint, License: "GPL", Instructions: tp.insns})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("loading the %s program: %w", tp.event, err)
		}
		t.progs = append(t.progs, prog)
		l, err := link.Tracepoint("sched", tp.event, prog, nil)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("following the command's children: tracepoint sched:%s: %w", tp.event, err)
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// Start starts cmd with every task it creates in the map.
func (t *Tasks) Start(cmd *exec.Cmd) error {
	// Go forks on the thread of the goroutine that calls Start.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self := uint32(unix.Gettid())
	if err := t.m.Put(self, uint32(1)); err != nil {
		return err
	}
	defer t.m.Delete(self)
	return cmd.Start()
}

// filterTasks is the start of the probe program when it traces only the
// tasks in the map tasks: it ends the program for any other thread. It
// keeps R6 and uses the stack at -24.
func filterTasks(tasks int) asm.Instructions {
	return append(currentTask(asm.FnMapLookupElem, tasks, -24),
		asm.JEq.Imm(asm.R0, 0, "out"),
	)
}

// forkProgram adds to the map tasks the new task of sched_process_fork,
// whose thread id is at childPID in the event, when the task creating it
// is in the map.
func forkProgram(tasks int, childPID int16) asm.Instructions {
	const childSlot, oneSlot = -8, -12
	insns := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	insns = append(insns, currentTask(asm.FnMapLookupElem, tasks, -4)...)
	return append(insns,
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R6, childPID, asm.Word),
		asm.StoreMem(asm.RFP, childSlot, asm.R1, asm.Word),
		asm.StoreImm(asm.RFP, oneSlot, 1, asm.Word),
		asm.LoadMapPtr(asm.R1, tasks),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, childSlot),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, oneSlot),
		asm.Mov.Imm(asm.R4, int32(ebpf.UpdateAny)),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
}

// exitProgram removes the ending task of sched_process_exit from the map
// tasks.
func exitProgram(tasks int) asm.Instructions {
	return append(currentTask(asm.FnMapDeleteElem, tasks, -4),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	)
}

// currentTask calls fn, a map helper, on the map tasks with the current
// thread's id, which it stores at slot of the stack, as the key.
func currentTask(fn asm.BuiltinFunc, tasks int, slot int16) asm.Instructions {
	return asm.Instructions{
		asm.FnGetCurrentPidTgid.Call(),
		asm.StoreMem(asm.RFP, slot, asm.R0, asm.Word),
		asm.LoadMapPtr(asm.R1, tasks),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(slot)),
		fn.Call(),
	}
}

// tracefsDirs are where tracefs is found mounted.
var tracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// tracepointField returns the offset of a 4-byte field in the events of a
// tracepoint, from its format file: it moves between kernels (the fork
// event's comm fields became __data_loc in 6.x).
func tracepointField(group, event, field string) (int16, error) {
	var f *os.File
	var err error
	for _, dir := range tracefsDirs {
		if f, err = os.Open(filepath.Join(dir, "events", group, event, "format")); err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("following the command's children needs tracefs (mount -t tracefs nodev /sys/kernel/tracing): %w", err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^\s*field:[^;]*\b` + regexp.QuoteMeta(field) + `;\s*offset:(\d+);\s*size:4;`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			off, err := strconv.ParseInt(m[1], 10, 16)
			return int16(off), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New(f.Name() + " has no 4-byte field " + field)
}
