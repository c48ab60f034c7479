package trace

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/switchhold"
	"github.com/go-usdt/usdt/internal/switchkeep"
	"github.com/go-usdt/usdt/internal/switchplan"
	"github.com/go-usdt/usdt/internal/textpatch"
	"github.com/go-usdt/usdt/internal/values"
)

// In a build with sites: switch a function runs the plain build's code,
// and its probes are in its traced copy, which runs only once the
// function is switched to it (textpatch). trace switches the functions
// whose probes it traces once their probes are on, in each process it
// attaches to, and switches them back when it detaches.

// switchPlan is the switches of the traced functions that have a traced
// copy, at the executable's link-time addresses; empty for a build
// without copies.
type switchPlan struct {
	opt     Options
	patches []textpatch.Patch
}

// planSwitches plans the switches of the functions of sites that have
// a traced copy, and says on stderr which cannot be switched, and why:
// through BPF (bpf), their calls fire at the notes on their code as
// compiled, which the ring does not record. A function with a copy has
// those notes (rewrite's plainNotes), each naming it by its symbol:
// where no site is one, no function is looked for in the executable,
// whose function table takes tens of milliseconds to read.
func planSwitches(opt Options, sites []site, bpf bool) *switchPlan {
	sp := &switchPlan{opt: opt}
	plain := plainOfCopies(sites)
	funcs := map[string]bool{}
	for i := range sites {
		if s := &sites[i]; plain(s) {
			funcs[s.table.Func] = true
		}
	}
	if len(funcs) == 0 {
		return sp
	}
	pairs, err := switchplan.PairsOf(opt.Binary, func(name string) bool { return funcs[name] })
	if err != nil {
		sp.say("no function switched to its traced copy: %v", err)
		return sp
	}
	then := "its calls go untraced"
	if bpf {
		then = "its calls fire at the notes on its code, with a trap each"
	}
	switchplan.Unswitched(pairs, opt.Verbose, then, func(line string) { sp.say("%s", line) })
	sp.patches = switchplan.Patches(pairs)
	return sp
}

func (sp *switchPlan) say(format string, args ...any) {
	fmt.Fprintln(sp.opt.Stderr, "usdt-toolexec trace:", values.EscapeLines(fmt.Sprintf(format, args...)))
}

// A procSwitch is the switches of one process.
type procSwitch struct {
	plan *switchPlan
	pid  int
	bias uint64
	// kept says that trace cannot switch back: the process is held by
	// trace's holder, a tracer, and only one not holding it can stop
	// it, or it is trace's child, whose stops its Wait would take. Its
	// keeper does, once trace (and the holder) let go, if the process
	// lives on.
	kept bool
	// done are the patches switched, at the process's addresses.
	done []textpatch.Patch
	// keeper switches them back should trace die first; nil for kept
	// switches.
	keeper *switchkeep.Keeper
	// holds are trace's holds on the functions switched, which another
	// tracer's restore leaves switched (internal/switchhold).
	holds *switchhold.Holds
}

// process is the switches of process pid, which loaded the executable
// bias above its link-time addresses; nil where there are none.
func (sp *switchPlan) process(pid int, bias uint64) *procSwitch {
	if sp == nil || len(sp.patches) == 0 {
		return nil
	}
	return &procSwitch{plan: sp, pid: pid, bias: bias}
}

// on switches the functions: in a process held stopped at its exec,
// with its only thread, by writing them; else while every thread of
// the process is stopped.
func (ps *procSwitch) on(held bool) {
	if ps == nil {
		return
	}
	patches := make([]textpatch.Patch, len(ps.plan.patches))
	for i, p := range ps.plan.patches {
		patches[i] = p.Moved(ps.bias)
	}
	var rep textpatch.Report
	var err error
	start := time.Now()
	if ps.keeper, err = switchkeep.Start("usdt-toolexec trace", ps.pid, patches); err != nil {
		ps.plan.say("process %d: no function switched to its traced copy, whose probes go untraced: %v", ps.pid, err)
		return
	}
	if ps.holds, err = switchplan.Hold(ps.pid, patches); err != nil {
		ps.plan.say("process %d: no function switched to its traced copy, whose probes go untraced: %v", ps.pid, err)
		ps.keeper.Done()
		ps.keeper = nil
		return
	}
	if held {
		rep, err = textpatch.SwitchHeld(ps.pid, patches)
	} else {
		rep, err = textpatch.Switch(ps.pid, patches, textpatch.Options{})
	}
	if err != nil {
		ps.plan.say("process %d: no function switched to its traced copy, whose probes go untraced: %v", ps.pid, err)
		ps.holds.Close()
		ps.holds = nil
		ps.keeper.Done()
		ps.keeper = nil
		return
	}
	ps.done = switchplan.Switched(rep, patches, ps.holds, func(format string, args ...any) {
		ps.plan.say("process %d: "+format, append([]any{ps.pid}, args...)...)
	})
	if ps.plan.opt.Verbose {
		how := rep.StopsText()
		if held {
			how = "at its exec"
		}
		ps.plan.say("switched %d of %d functions of process %d to their traced copies in %v (%s)", len(ps.done), len(patches), ps.pid, time.Since(start).Round(time.Microsecond), how)
	}
}

// off switches back the functions on switched, or leaves them to the
// keeper where they are kept; once.
func (ps *procSwitch) off() {
	if ps == nil {
		return
	}
	holds := ps.holds
	ps.holds = nil
	if ps.kept {
		// The keeper switches back once the holder lets go, those no
		// other tracer holds: trace's holds go first.
		holds.Close()
		ps.keeper.Leave()
		ps.keeper = nil
		return
	}
	defer func() {
		ps.keeper.Done()
		ps.keeper = nil
	}()
	if len(ps.done) == 0 {
		holds.Close()
		return
	}
	done := ps.done
	ps.done = nil
	back, err := switchplan.Restore(ps.pid, done, holds, func(format string, args ...any) {
		ps.plan.say("process %d: "+format+" (to its traced copy, whose probes are off)", append([]any{ps.pid}, args...)...)
	})
	if err != nil {
		ps.plan.say("process %d: its functions stay switched to their traced copies, whose probes are off: %v", ps.pid, err)
		return
	}
	if ps.plan.opt.Verbose && back > 0 {
		ps.plan.say("switched back %d functions of process %d", back, ps.pid)
	}
}

// startSwitched starts cmd through start, stopped at its exec
// (PTRACE_TRACEME), switches its traced functions there, before its
// first instruction, and lets it go (PTRACE_DETACH). A command that
// would gain privileges at its exec, which it does not while traced,
// starts as it would untraced, its functions as compiled.
func startSwitched(cmd *exec.Cmd, start func(*exec.Cmd) error, plan *switchPlan, sw **procSwitch) error {
	if ring.GainsPrivileges(cmd.Path) {
		plan.say("%s gains privileges when it runs, which it would not while held to be switched: it runs as compiled, its traced functions' calls untraced (-p switches a running process)", values.Escape(cmd.Path))
		return start(cmd)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	// ptrace's requests come from the thread that forked.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := start(cmd); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("process %d at its exec: %w", pid, err)
		}
		break
	}
	if !ws.Stopped() {
		// Gone before its first instruction: its Wait says how.
		return nil
	}
	if bias, err := ring.BiasOf(pid, cmd.Path); err != nil {
		plan.say("process %d: no function switched to its traced copy: %v", pid, err)
	} else {
		*sw = plan.process(pid, bias)
		// trace's child: its Wait, under way from now on, would take
		// the stops a switch back waits for. The keeper switches
		// back, should the command outlive trace.
		(*sw).kept = true
		(*sw).on(true)
	}
	// The stop's SIGTRAP is the exec's, not the program's: it goes.
	if err := unix.PtraceDetach(pid); err != nil {
		return fmt.Errorf("letting process %d go after its exec: %w", pid, err)
	}
	return nil
}
