// Package trace is a tracer for the probes of this project: it reads a
// binary's notes, attaches one BPF program (package bpfprog) to every
// selected probe through cilium/ebpf, decodes each record once into an
// Event, and hands that to the text and -json printers, the latency
// histograms and the exporters.
package trace

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/go-usdt/usdt/internal/metrics"
	"github.com/go-usdt/usdt/internal/ring"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
	"golang.org/x/sys/unix"
)

// Options is what `usdt-toolexec trace` was asked.
type Options struct {
	Binary string // the executable; the command's when Command is set
	PID    int    // only this process, 0 for all
	// Exe traces every process that runs this executable, now and
	// later, each as PID would (RunExe).
	Exe      string
	Patterns []string // globs on provider:name or a Go function
	Command  []string // run this and trace it until it exits
	JSON     bool
	Latency  bool
	// Stats counts calls and their latencies in the kernel and prints
	// them at the end, and every Interval when it is not zero.
	Stats    bool
	Interval time.Duration
	// Counts, with Stats (or Sampling, below), is handed what has been
	// counted since the trace began, as trace reads the counters while it runs (every
	// quarter of a second, or less often where a read takes more than a
	// twentieth of the time), and the last counts once more before Run
	// returns: the metrics exporters' source. Called on trace's reading
	// goroutine, it must not block.
	Counts  func(*metrics.Snapshot)
	Verbose bool
	Attach  Attach // AttachAuto when empty
	// Buffer is the size of the ring buffer the events come through, a
	// power of two; 0 for bpfprog.DefaultRing.
	Buffer int
	// Block is how long a probe whose buffer is full waits for the
	// tracer to make room before it drops its event (-block); 0 drops
	// at once. Only the in-process ring can wait.
	Block time.Duration
	// NoValues has the probes read no Go value through their arguments'
	// pointers (-values=false): only the words of the arguments they
	// hold, which costs the program no reads of its memory that could
	// fault, nor a system call.
	NoValues bool
	// Sampling has the program itself sample the calls whose events it
	// writes, where it writes them to the in-process ring on amd64
	// (ring.Sample): a root call at Sample's rate, or as its incoming
	// trace context's flag says, and the calls under it as it is. Its
	// events are Sampled. Elsewhere every event comes, and the consumer
	// samples.
	Sampling bool
	Sample   float64
	// The calls that the program's sampling leaves out it counts, as
	// -stats does, and Counts is handed what it counted of them, by
	// function, while the trace runs and once more at its end; LeftOut
	// is handed, at the end, how many it left out, and how many of
	// those because their callers did not sample them. Where the
	// program's ring has no room for the counters it writes a compact
	// record of each such call instead, which Counted is handed, on the
	// events' goroutine (nil: it writes none).
	LeftOut func(calls, byCaller uint64)
	Counted func(Counted)
	// Transport is how the events reach the tracer; TransportAuto when
	// empty.
	Transport Transport
	// transportWhy is why the trace goes through its transport, which
	// -v says after it attached.
	transportWhy string
	// exe is the executable traced, as Run found it: a process (-p) that
	// no longer runs it (an exec since) is not written to.
	exe os.FileInfo
	// Events, when set, receives every event, in the order they are read,
	// from one goroutine; then only JSON prints them.
	Events func(*Event)
	// Started, when set, is handed the pid of each process whose events
	// come, as soon as trace knows it and while the process lives: the
	// command trace starts, the process of -p, and, through the ring, the
	// command's children that run the binary. An exporter reads there
	// what /proc says of a process only while it runs. Called on trace's
	// goroutines, before the process's first event is read, and not
	// necessarily on Events's goroutine.
	// env is the environment trace gave the command it started (which a
	// short command takes out of /proc within milliseconds), nil for a
	// process whose environment only /proc says.
	Started func(pid int, env []string)
	Stdout  io.Writer
	Stderr  io.Writer
}

// Counted is a call that the program's sampling left out
// (Options.Sampling), as metrics.Tally's Call counts it.
type Counted struct {
	// Name is the function's, or a usdtgen probe's provider:name.
	Name string
	// Timed says that Ns is how long the call took: its exit's.
	Timed bool
	Ns    uint64
	// ErrResult says that the function's last result is an error, and
	// Failed that it was not nil.
	ErrResult, Failed bool
	// ByCaller says that the call's trace was left out by its caller:
	// the incoming trace context's flag, not -sample.
	ByCaller bool
}

// MemoryLimit is the soft limit of the Go heap that trace sets for
// itself (debug.SetMemoryLimit), unless GOMEMLIMIT or its caller set one,
// and raises by what the binary's tables take (roomForTables):
// what it holds is bounded (the backlog of records to print, 128 MiB,
// one copy out of the rings, ring.TakeMax, and under 512 KiB for each
// process it traces), and the limit keeps the collector from letting the
// heap grow to twice that between its cycles, as it does by default.
const MemoryLimit = 384 << 20

// limitMemory sets MemoryLimit, unless a limit is set.
func limitMemory() {
	if os.Getenv("GOMEMLIMIT") == "" && debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.SetMemoryLimit(MemoryLimit)
	}
}

// roomForTables raises the soft limit of the heap by what it grew since
// before (heapObjects) while the binary's tables were read, and returns
// the func that takes that room back once they are dropped: the tables
// of a large binary fill most of the heap (Caddy's 120,000 probes, some
// 300 MiB), and under the limit alone the collector ran back to back, a
// quarter of trace's CPU, while trace switched Caddy's functions, and
// each stop of Caddy took longer. A limit that GOMEMLIMIT set stays as
// set. Each process that -exe traces reads its tables, and makes its
// room.
func roomForTables(before uint64) (release func()) {
	after := heapObjects()
	if os.Getenv("GOMEMLIMIT") != "" || after <= before {
		return func() {}
	}
	room := int64(after - before)
	limits.add(room)
	return func() { limits.add(-room) }
}

// liftLimit lifts trace's soft limit of the heap while the binary's
// tables are read, and returns the func that sets it again: tables
// larger than the limit (a build of Caddy with sites: switch) had the
// collector run back to back while they were read, half of trace's
// CPU for seconds, until roomForTables made room for them. While they
// are read the heap grows as GOGC lets it, and lifted says so. A limit
// that GOMEMLIMIT set, or none, stays as it is.
func liftLimit() (set func(), lifted bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}, false
	}
	limits.Lock()
	defer limits.Unlock()
	if limits.reading == 0 {
		limits.held = debug.SetMemoryLimit(-1)
		if limits.held == math.MaxInt64 {
			return func() {}, false
		}
		debug.SetMemoryLimit(math.MaxInt64)
	}
	limits.reading++
	return func() {
		limits.Lock()
		defer limits.Unlock()
		if limits.reading--; limits.reading == 0 {
			debug.SetMemoryLimit(limits.held)
		}
	}, true
}

// limits are trace's changes to its soft limit of the heap: reading
// counts the tables being read, while which the limit, held, is lifted.
var limits limitState

type limitState struct {
	sync.Mutex
	reading int
	held    int64
}

// add raises the limit by d (lowers it, where d < 0), or the limit held
// while it is lifted; no limit stays none.
func (l *limitState) add(d int64) {
	l.Lock()
	defer l.Unlock()
	if l.reading > 0 {
		l.held += d
		return
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		debug.SetMemoryLimit(limit + d)
	}
}

// heapObjects is the bytes of the heap's objects, live or not yet
// collected.
func heapObjects() uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// started hands Started the pid of a process whose events come, and
// the environment trace gave it, nil where it did not start it.
func (opt *Options) started(pid int, env []string) {
	if opt.Started != nil {
		opt.Started(pid, env)
	}
}

// Run traces until interrupted or until the command or the process ends.
// The command's exit status is returned as an *exec.ExitError.
func Run(opt Options) error {
	limitMemory()
	if opt.Exe != "" {
		return RunExe(opt)
	}
	if opt.Binary == "" && len(opt.Command) > 0 {
		p, err := exec.LookPath(opt.Command[0])
		if err != nil {
			return err
		}
		opt.Binary = p
	}
	// A pidfd of a process traced with -p becomes readable when it
	// exits, as the command's Wait returns: trace ends then.
	exited := -1
	if opt.PID != 0 && len(opt.Command) == 0 {
		fd, err := unix.PidfdOpen(opt.PID, 0)
		if err != nil {
			return fmt.Errorf("process %d: %w", opt.PID, err)
		}
		defer unix.Close(fd)
		exited = fd
	}
	exe, err := os.Stat(opt.Binary)
	if err != nil {
		return err
	}
	opt.exe = exe
	before := heapObjects()
	set, lifted := liftLimit()
	all, err := readSites(opt.Binary)
	if err != nil {
		set()
		return err
	}
	if lifted {
		// The read's garbage goes, and the room made is the tables'.
		runtime.GC()
	}
	release := roomForTables(before)
	set()
	defer release()
	if len(all) == 0 {
		return fmt.Errorf("%s has no USDT probes (build it with usdtgen probes or with go build -toolexec=usdt-toolexec and a rules file)", opt.Binary)
	}
	sites, err := selectSites(all, opt.Patterns)
	if err != nil {
		return err
	}
	describe(sites)
	ctl, useRing, why, err := chooseTransport(opt, sites)
	if err != nil {
		return err
	}
	opt.transportWhy = why
	if useRing {
		return runRing(opt, all, sites, ctl, exited)
	}
	if opt.Block > 0 {
		// Only a writer in the program can wait: a BPF program may not.
		return fmt.Errorf("-block waits in the program, for room in its own ring, and this trace goes through BPF (%s): drop -block, or trace through the ring (-transport ring)", why)
	}
	raiseMemlock()
	if err := needCookies(opt.Binary); err != nil {
		return err
	}
	if opt.Stats {
		return runStats(opt, sites, exited)
	}
	names, namesErr := describeValues(sites, opt.Binary, opt.NoValues)
	progSites := make([]bpfprog.Site, len(sites))
	for i, s := range sites {
		progSites[i] = bpfprog.Site{Addr: s.addr, Args: s.args, Strs: s.strs, Plan: s.plan, Exit: s.exit, Goroutine: s.fn != "" && len(s.args) > 0}
	}
	ring := opt.Buffer
	if ring == 0 {
		ring = bpfprog.DefaultRing
	}
	objs, err := bpfprog.NewEvents(progSites, ring)
	if err != nil {
		return bpfError(err)
	}
	defer objs.Close()
	tasks, err := commandTasks(opt)
	if err != nil {
		return err
	}
	objs.Only(tasks)
	rd, err := ringbuf.NewReader(objs.Ring())
	if err != nil {
		return bpfError(err)
	}
	defer rd.Close()
	f, err := follow(opt, sites, tasks, objs.Load, exited)
	if err != nil {
		return err
	}
	defer f.Close()
	if opt.Verbose && namesErr != nil {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: interfaces show their data's address, not their dynamic type: %v\n", namesErr)
	}
	d, p := newDecoder(sites, opt.PID, names), newPrinter(opt)
	d.jsonOnly = opt.JSON && opt.Events == nil
	switch {
	case f.cmd != nil:
		names.early(f.cmd.Process.Pid)
	case opt.PID != 0:
		names.early(opt.PID)
		opt.started(opt.PID, nil)
	}
	var rec ringbuf.Record
	for draining := false; ; {
		// A deadline rather than Close ends the loop: the reader returns
		// every event already in the buffer before it reports the deadline,
		// so the command's last events are printed.
		if !draining {
			if f.stopped() {
				draining = true
				// Detached first: a program still firing could fill the
				// buffer as fast as it drains, and the trace would end
				// only with the program.
				f.detach()
				rd.SetDeadline(time.Now())
			} else {
				rd.SetDeadline(time.Now().Add(pollEvery))
			}
		}
		err := rd.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			p.w.Flush()
			if draining {
				break
			}
			continue
		}
		if err != nil {
			return err
		}
		if ev := d.decode(rec.RawSample); ev != nil {
			p.print(ev)
		}
	}
	p.finish()
	if n := objs.Lost(); n > 0 {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: lost %d events: the ring buffer (%s) was full; -buffer makes it larger\n", n, SizeText(ring))
	}
	return f.exit()
}

// follower is a trace under way: the probes attached, and what ends it,
// an interrupt, the command's exit or the exit of the process of -p.
type follower struct {
	links   []link.Link
	ctx     context.Context
	stop    context.CancelFunc
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	pidfd   int // -1 without -p
	// resume lets a command started stopped run; nil when it runs.
	resume func() error
	// sw switches the traced functions of the command or the process
	// to their traced copies; nil for a build without.
	sw *procSwitch
}

// follow attaches the program load makes to the sites, then starts the
// command, if any, with only its tasks in the map only.
func follow(opt Options, sites []site, only *bpfprog.Tasks, load loader, pidfd int) (*follower, error) {
	// An interrupt from the moment trace says it attached ends the trace
	// as any other does, with what it owes printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	start := time.Now()
	where := atNop5(sites, kernelOptimizesUprobes())
	links, how, err := attach(opt.Binary, load, sites, opt.PID, opt.Attach)
	if err != nil {
		stop()
		return nil, bpfError(err)
	}
	f := &follower{links: links, ctx: ctx, stop: stop, done: make(chan struct{}), pidfd: pidfd}
	// Switched before trace says it attached: from then on, every call
	// is traced.
	switches := planSwitches(opt, sites, true)
	if opt.PID != 0 && len(opt.Command) == 0 && len(switches.patches) > 0 {
		bias, err := ring.BiasOf(opt.PID, opt.Binary)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.sw = switches.process(opt.PID, bias)
		f.sw.on(false)
	}
	if opt.Verbose {
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: attached %d probes of %s %s in %v, %s\n", len(sites), opt.Binary, how, time.Since(start).Round(time.Microsecond), where)
		fmt.Fprintf(opt.Stderr, "usdt-toolexec trace: transport bpf: %s\n", opt.transportWhy)
	}
	if len(opt.Command) > 0 {
		f.cmd = exec.Command(opt.Binary, opt.Command[1:]...)
		f.cmd.Args[0] = opt.Command[0]
		// The command writes to stderr: stdout is the events', so that
		// -json output stays parseable.
		f.cmd.Stdin, f.cmd.Stdout, f.cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
		start := only.Start
		if len(switches.patches) > 0 {
			start = func(cmd *exec.Cmd) error {
				return startSwitched(cmd, only.Start, switches, &f.sw)
			}
		}
		if err := start(f.cmd); err != nil {
			f.Close()
			return nil, err
		}
		// Now, while it runs: Start returned once it ran the binary,
		// and an exporter reads what /proc says of it (Started), which
		// a short command takes away within milliseconds.
		opt.started(f.cmd.Process.Pid, f.cmd.Environ())
		go func() {
			f.waitErr = f.cmd.Wait()
			close(f.done)
		}()
	}
	return f, nil
}

// stopped reports whether the trace is to end.
func (f *follower) stopped() bool {
	select {
	case <-f.ctx.Done():
		return true
	case <-f.done:
		return true
	default:
		return f.pidfd >= 0 && readable(f.pidfd)
	}
}

// exit returns how the command exited, an *exec.ExitError when it failed,
// and nil when it has not: trace was interrupted, and the command (in the
// same process group) ends in its own time.
func (f *follower) exit() error {
	select {
	case <-f.done:
		return f.waitErr
	default:
		return nil
	}
}

func (f *follower) Close() {
	f.stop()
	f.detach()
	if f.resume != nil && f.cmd != nil {
		// Never resumed: the trace failed to start.
		f.cmd.Process.Kill()
		f.resume()
	}
}

// detach switches the traced functions back and takes the program off
// the sites: no event comes after.
func (f *follower) detach() {
	f.sw.off()
	for _, l := range f.links {
		l.Close()
	}
	f.links = nil
}

// readable reports whether fd can be read without blocking.
func readable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// pollEvery is how often the reader looks for events that did not wake it
// (the program wakes it only when the buffer fills up), and so how late an
// event of a quiet process may print.
const pollEvery = 20 * time.Millisecond

// Attach is how the program is attached to the sites.
type Attach string

const (
	// AttachAuto tries AttachMulti and falls back to AttachSingle when
	// the multi link cannot be made, for any reason: kernels before 6.6
	// have no multi-uprobe links, and they refuse one with EINVAL as
	// often as with a sign cilium/ebpf reads as ErrNotSupported.
	AttachAuto   Attach = "auto"
	AttachMulti  Attach = "multi"  // one uprobe_multi link for every site
	AttachSingle Attach = "single" // one uprobe per site
)

// loader loads the program to attach, for an uprobe_multi link or for
// single uprobes: the kernel checks the attach type a program was loaded
// with.
type loader func(multi bool) (*ebpf.Program, error)

// attach attaches the program to every site as mode says, and returns
// the links and, for -v, how it attached.
func attach(bin string, load loader, sites []site, pid int, mode Attach) ([]link.Link, string, error) {
	ex, err := link.OpenExecutable(bin)
	if err != nil {
		return nil, "", err
	}
	var multiErr error
	if mode != AttachSingle {
		l, err := attachMulti(ex, load, sites, pid)
		if err == nil {
			return []link.Link{l}, "with one uprobe_multi link", nil
		}
		if mode == AttachMulti {
			return nil, "", err
		}
		multiErr = err
	}
	links, err := attachSingle(ex, load, sites, pid)
	how := "with one uprobe per site"
	if !bpfprog.HaveCookies() {
		how += ", told apart by address (this kernel has no BPF cookies)"
	}
	switch {
	case err != nil && multiErr != nil:
		return nil, "", fmt.Errorf("%w; and one uprobe per site: %w", multiErr, err)
	case err != nil:
		return nil, "", err
	case multiErr != nil:
		return links, fmt.Sprintf("%s (%v)", how, multiErr), nil
	}
	return links, how, nil
}

// attachMulti attaches the program to every site with one uprobe_multi
// link (Linux 6.6+).
func attachMulti(ex *link.Executable, load loader, sites []site, pid int) (link.Link, error) {
	multi := link.UprobeMultiOptions{PID: uint32(pid)}
	for i, s := range sites {
		multi.Addresses = append(multi.Addresses, s.offset)
		multi.RefCtrOffsets = append(multi.RefCtrOffsets, s.refCtr)
		multi.Cookies = append(multi.Cookies, uint64(i))
	}
	prog, err := load(true)
	if err != nil {
		return nil, fmt.Errorf("no uprobe_multi link: %w", err)
	}
	l, err := ex.UprobeMulti(nil, prog, &multi)
	if err != nil {
		return nil, fmt.Errorf("no uprobe_multi link: %w", err)
	}
	return l, nil
}

// attachSingle attaches the program to each site with a uprobe of its own.
func attachSingle(ex *link.Executable, load loader, sites []site, pid int) ([]link.Link, error) {
	prog, err := load(false)
	if err != nil {
		return nil, err
	}
	var links []link.Link
	for i, s := range sites {
		opts := &link.UprobeOptions{Address: s.offset, RefCtrOffset: s.refCtr, PID: pid}
		if bpfprog.HaveCookies() {
			opts.Cookie = uint64(i)
		}
		l, err := ex.Uprobe("", prog, opts)
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			return nil, fmt.Errorf("probe %s:%s: %w", s.Provider, s.Name, err)
		}
		links = append(links, l)
	}
	return links, nil
}

// SizeText writes a buffer's size, a power of two, as -buffer takes it.
func SizeText(n int) string {
	switch {
	case n >= 1<<30:
		return strconv.Itoa(n>>30) + "G"
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "M"
	}
	return strconv.Itoa(n>>10) + "K"
}

// commandTasks is the tasks map of trace -- CMD, nil without a command.
func commandTasks(opt Options) (*bpfprog.Tasks, error) {
	if len(opt.Command) == 0 {
		return nil, nil
	}
	t, err := bpfprog.NewTasks()
	if err != nil {
		return nil, bpfError(err)
	}
	return t, nil
}

// raiseMemlock lifts RLIMIT_MEMLOCK, which kernels before 5.11 charged BPF
// maps to; later ones charge the cgroup. A process that may not raise it
// (no CAP_SYS_RESOURCE) goes on: where the limit matters, loading fails
// with EPERM, which bpfError explains. cilium/ebpf/rlimit would decide by
// creating a BPF map in its init function, which every process of this
// executable would then run, each compile of an instrumented build
// included.
func raiseMemlock() {
	unlimited := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unlimited)
}

// needCookies says plainly that a kernel is too old to trace bin: one
// without BPF cookies for uprobes (bpf_get_attach_cookie, Linux 5.15)
// tells the sites apart by their addresses in the executable, which a
// position-independent one is loaded away from.
func needCookies(bin string) error {
	if bpfprog.HaveCookies() {
		return nil
	}
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return nil
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	return fmt.Errorf("%s is position-independent (-buildmode=pie), which usdt-toolexec trace traces on Linux 5.15 and later: this kernel (%s) has no BPF cookies for uprobes; build it without -buildmode=pie, or use bpftrace, gdb, perf or bcc, which read the probes on older kernels", bin, unix.ByteSliceToString(uts.Release[:]))
}

// bpfError adds the fix to the errors a user without BPF gets.
func bpfError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: tracing needs root or CAP_BPF and CAP_PERFMON (run it with sudo)", err)
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w: this kernel has no usable BPF (it needs Linux 5.10+ with CONFIG_BPF_SYSCALL and uprobes)", err)
	}
	return err
}

// monoOffset converts CLOCK_MONOTONIC, which bpf_ktime_get_ns reads, to
// wall-clock time.
func monoOffset() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(time.Now().UnixNano() - ts.Nano())
}

var le = binary.LittleEndian
