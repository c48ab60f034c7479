package ring

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-usdt/usdt/internal/ringlayout"
	"golang.org/x/sys/unix"
)

// The holder: the process that ptraces a command for Hold, so that the
// tracer never does (see Hold). It is this program again, started with
// holderEnv set, and it talks with the tracer by messages on fd 3, a
// socket (SOCK_SEQPACKET).

// holderEnv, set in its environment, makes this program a holder.
const holderEnv = "USDT_RING_HOLDER"

const (
	// holdBeat is how often a tracer that beats tells its holder so.
	holdBeat = 250 * time.Millisecond
	// holdWait is how long the holder waits for the tracer's answer
	// after the tracer's last beat.
	holdWait = 2 * time.Second
)

// A msg is one message between the tracer and its holder: its kind and
// a process or thread id (or an errno).
type msg struct {
	kind uint32
	pid  int32
	// text is a path, for mLetGo.
	text string
}

// The kinds of msg, from the tracer to the holder and back.
const (
	// Tracer to holder.
	mSeize   = iota + 1 // seize pid, and say mSeized
	mResume             // the command, stopped at its exec, may run
	mDrained            // the command, stopped at its exit, may go on
	mGo                 // the child pid told of may go on
	mIgnore             // tell no more children
	mAlive              // the tracer beats
	// Holder to tracer.
	mSeized    // pid is the errno of the seize, 0 when it worked
	mStarted   // the command stopped at its exec
	mExiting   // the command stopped at its exit
	mDone      // the command is no longer held: its parent may wait
	mChildExec // process pid ran an executable: mGo when done
	mChildExit // process pid, told of at its exec, exits: mGo when done
	mLetGo     // process pid runs text, which gains privileges: let go
	// mLease (tracer to holder) gives the address of the lease (UntilAt)
	// of the ring of process pid, in text's 8 bytes: at the tracer's
	// end, the holder runs it out.
	mLease = 100
)

func (m msg) String() string { return fmt.Sprintf("message %d (%d)", m.kind, m.pid) }

// holderConn is one end of the socket between a tracer and its holder.
type holderConn struct {
	f    *os.File
	cmd  *exec.Cmd // the holder, at the tracer's end
	mu   sync.Mutex
	once sync.Once
}

func (c *holderConn) send(m msg) error {
	b := make([]byte, 8, 8+len(m.text))
	binary.LittleEndian.PutUint32(b, m.kind)
	binary.LittleEndian.PutUint32(b[4:], uint32(m.pid))
	b = append(b, m.text[:min(len(m.text), msgText)]...)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.f.Write(b)
	return err
}

// msgText bounds a message's text.
const msgText = 4096

func (c *holderConn) recv() (msg, error) {
	var b [8 + msgText]byte
	n, err := c.f.Read(b[:])
	if err != nil {
		return msg{}, err
	}
	if n < 8 {
		return msg{}, fmt.Errorf("a message of %d bytes from the holder's socket", n)
	}
	return msg{kind: binary.LittleEndian.Uint32(b[:]), pid: int32(binary.LittleEndian.Uint32(b[4:])), text: string(b[8:n])}, nil
}

func (c *holderConn) pid() int { return c.cmd.Process.Pid }

// close ends the conversation: the holder exits, and the kernel lets go
// of every process it still traces.
func (c *holderConn) close() { c.once.Do(func() { c.f.Close() }) }

// startHolder starts a holder, in a process group of its own, so that
// the terminal's signals (Ctrl-C, Ctrl-Z) do not reach it: they reach
// the command, which it passes them on to, and the tracer.
func startHolder() (*holderConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine, its := os.NewFile(uintptr(fds[0]), "holder"), os.NewFile(uintptr(fds[1]), "tracer")
	defer its.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args[0] = "usdt-toolexec-holder"
	cmd.Env = append(os.Environ(), holderEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{its}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, err
	}
	go cmd.Wait()
	return &holderConn{f: mine, cmd: cmd}, nil
}

// holder is the holder's state.
type holder struct {
	conn    *holderConn
	replies chan msg
	// leases holds the address of the lease of each process's ring.
	mu     sync.Mutex
	leases map[int]uint64
	// alive is when the tracer last beat, or the holder began to wait
	// for it, in Unix ns.
	alive  atomic.Int64
	ignore atomic.Bool
}

// runHolder is a holder's life: it never returns.
func runHolder() {
	os.Unsetenv(holderEnv)
	// Its process group is its own; these come only from a kill by
	// hand, and its tracer's end is its own.
	signal.Ignore(unix.SIGINT, unix.SIGQUIT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGHUP, unix.SIGPIPE)
	h := &holder{conn: &holderConn{f: os.NewFile(3, "tracer")}, replies: make(chan msg, 64), leases: map[int]uint64{}}
	unix.CloseOnExec(3)
	// The kernel knows a tracer by its thread: every ptrace call comes
	// from this one.
	runtime.LockOSThread()
	first, err := h.conn.recv()
	if err != nil || first.kind != mSeize {
		os.Exit(1)
	}
	go h.read()
	h.run(int(first.pid))
	// Nothing left to trace: the tracer's end is the holder's.
	select {}
}

// read takes the tracer's messages; at the tracer's end, the holder runs
// out the leases of the rings it was told of, and exits, and the kernel
// lets go of every process it traces, each going on from where it
// stopped, its signal delivered.
func (h *holder) read() {
	for {
		m, err := h.conn.recv()
		if err != nil {
			h.expire()
			os.Exit(0)
		}
		switch m.kind {
		case mLease:
			if len(m.text) == 8 {
				h.mu.Lock()
				h.leases[int(m.pid)] = binary.LittleEndian.Uint64([]byte(m.text))
				h.mu.Unlock()
			}
		case mAlive:
			h.alive.Store(time.Now().UnixNano())
		case mIgnore:
			h.ignore.Store(true)
		default:
			h.replies <- m
		}
	}
}

// expire runs out the lease of each ring the tracer was told of, so that
// the program's next fire turns its probes off: a trace that dies while
// a job stop has its lease set to a day (trace's stopWithJob) leaves
// nothing on. A time below both clocks' (TicksTag, as a signed word) is
// past for the writer, whichever clock it reads.
func (h *holder) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, ringlayout.TicksTag)
	me := strconv.Itoa(os.Getpid())
	for pid, addr := range h.leases {
		// Only a process this holder still traces: it has neither
		// exited (its id maybe another's now) nor run another
		// executable unseen.
		if tracer, _ := StatusField(fmt.Sprintf("/proc/%d/status", pid), "TracerPid"); tracer != me {
			continue
		}
		local := []unix.Iovec{{Base: &b[0], Len: 8}}
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: 8}}
		unix.ProcessVMWritev(pid, local, remote, 0)
	}
}

// forget drops the lease of process pid, which ran another executable.
func (h *holder) forget(pid int) {
	h.mu.Lock()
	delete(h.leases, pid)
	h.mu.Unlock()
}

// await waits for the tracer's message of kind about pid, as long as
// the tracer beats, and at most holdWait after its last beat; it
// reports whether the message came.
func (h *holder) await(kind uint32, pid int32) bool {
	h.alive.Store(time.Now().UnixNano())
	for {
		left := holdWait - time.Since(time.Unix(0, h.alive.Load()))
		if left <= 0 {
			return false
		}
		t := time.NewTimer(left)
		select {
		case m := <-h.replies:
			t.Stop()
			if m.kind == kind && m.pid == pid {
				return true
			}
		case <-t.C:
		}
	}
}

// tell tells the tracer of a child and waits for its go.
func (h *holder) tell(kind uint32, pid int) {
	if h.ignore.Load() {
		return
	}
	if h.conn.send(msg{kind: kind, pid: int32(pid)}) == nil {
		h.await(mGo, int32(pid))
	}
}

// run seizes process pid, which waits for it to exec the command, and
// holds it and the processes it starts, until none is left.
func (h *holder) run(pid int) {
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, follow, 0, 0); e != 0 {
		h.conn.send(msg{kind: mSeized, pid: int32(e)})
		return
	}
	h.conn.send(msg{kind: mSeized})
	// execed holds the processes told to the tracer at an exec, to be
	// told at their exit. Until the command's exec, the process is
	// this program, waiting to run it.
	execed := map[int]bool{}
	started, exiting := false, false
	// A process that a tracer without CAP_SYS_PTRACE holds gains no
	// privilege when it runs a setuid, setgid or file-capable
	// executable: each process the command starts is stepped from one
	// system call to the next (PTRACE_SYSCALL) until it runs an
	// executable, and one that is about to run such a file is let go.
	// known holds the threads seen, stepping the processes stepped.
	stepping, known := map[int]bool{}, map[int]bool{}
	step := !capable()
	resume := func(tid, sig int) error {
		if stepping[tid] {
			return unix.PtraceSyscall(tid, sig)
		}
		return unix.PtraceCont(tid, sig)
	}
	restart := func(tid, sig int) {
		if resume(tid, sig) != nil {
			// The kernel refuses requests about a thread that exec
			// made the leader, taking over its id, until its tracer
			// has taken the exec stop's report, not only seen it
			// (WNOWAIT), (ptrace.c, looks_like_a_spurious_pid): the
			// report is taken, and the thread goes on.
			var info unix.Siginfo
			unix.Waitid(unix.P_PID, tid, &info, unix.WSTOPPED|unix.WEXITED|unix.WALL|unix.WNOTHREAD|unix.WNOHANG, nil)
			resume(tid, sig)
		}
	}
	for {
		tid, code, status, err := waitAny()
		if err != nil {
			return
		}
		if code != cldTrapped {
			// A thread or a process ended: taken here, its tracer,
			// so that its parent learns of it.
			var info unix.Siginfo
			unix.Waitid(unix.P_PID, tid, &info, unix.WEXITED|unix.WALL|unix.WNOTHREAD, nil)
			delete(execed, tid)
			h.forget(tid)
			if tid == pid {
				// Killed without stopping at its exit.
				h.conn.send(msg{kind: mDone})
			}
			continue
		}
		if !known[tid] {
			known[tid] = true
			// A process of the command's, not one of its threads.
			stepping[tid] = step && tid != pid && tgid(tid) == tid
		}
		sig := 0
		// A ptrace stop's status is its signal, and its event above.
		switch event := status >> 8; {
		case event == 0 && status&0xff == syscallStop:
			if path, ok := privilegedExec(tid); ok {
				// Detached at the system call's entry: the exec
				// runs untraced, and gains what it gains.
				unix.PtraceDetach(tid)
				delete(stepping, tid)
				h.conn.send(msg{kind: mLetGo, pid: int32(tid), text: path})
				continue
			}
		case event == unix.PTRACE_EVENT_STOP:
			// A group stop, which lasts until a SIGCONT, as without
			// a tracer; else a new task's first stop, or the end
			// of a group stop.
			if stopSignal(status & 0xff) {
				unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_LISTEN, uintptr(tid), 0, 0, 0, 0)
				continue
			}
		case !started:
			if tid == pid && event == unix.PTRACE_EVENT_EXEC {
				started = true
				h.conn.send(msg{kind: mStarted})
				h.await(mResume, 0)
			} else if event == 0 {
				sig = status & 0xff
			}
		case event == unix.PTRACE_EVENT_EXIT && (tid == pid || groupExiting(pid, tid)):
			// The process's exit: its leader's, or that of the thread
			// that called exit_group, which stops first. The leader,
			// killed by that call, may not stop at all.
			if !exiting {
				exiting = true
				h.conn.send(msg{kind: mExiting})
				h.await(mDrained, 0)
			}
			if tid == pid {
				// Its other threads stop at their exits too: they
				// are continued, and taken, as they come, until its
				// parent may wait for it.
				h.forget(pid)
				unix.PtraceDetach(pid)
				h.conn.send(msg{kind: mDone})
				continue
			}
		case event == unix.PTRACE_EVENT_EXIT:
			leader := tgid(tid)
			if execed[leader] && (tid == leader || groupExiting(leader, tid)) {
				delete(execed, leader)
				h.tell(mChildExit, leader)
				h.forget(leader)
			}
		case event == unix.PTRACE_EVENT_EXEC:
			// The thread that called exec is now the process's only
			// one, known by the process's id.
			delete(stepping, tid)
			h.forget(tid)
			execed[tid] = true
			h.tell(mChildExec, tid)
		case event == 0:
			// A signal: passed on as it came.
			sig = status & 0xff
		}
		restart(tid, sig)
	}
}

// syscallStop is the signal of a system call's stop, with
// PTRACE_O_TRACESYSGOOD.
const syscallStop = int(unix.SIGTRAP) | 0x80

// capable reports whether this process has CAP_SYS_PTRACE, with which a
// process it traces gains its privileges at exec as untraced.
func capable() bool {
	v, ok := StatusField("/proc/self/status", "CapEff")
	if !ok {
		return false
	}
	caps, err := strconv.ParseUint(v, 16, 64)
	return err == nil && caps&(1<<unix.CAP_SYS_PTRACE) != 0
}

// privilegedExec reports whether thread tid, at a system call's stop,
// is entering an exec of an executable that gains privileges (setuid,
// setgid or file capabilities), and which.
func privilegedExec(tid int) (string, bool) {
	// struct ptrace_syscall_info: op, 3 bytes of padding, arch, the
	// instruction and stack pointers, then for an entry the system
	// call's number and its 6 arguments.
	var info [10]uint64
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GET_SYSCALL_INFO, uintptr(tid), unsafe.Sizeof(info), uintptr(unsafe.Pointer(&info)), 0, 0); e != 0 {
		return "", false
	}
	if byte(info[0]) != unix.PTRACE_SYSCALL_INFO_ENTRY {
		return "", false
	}
	nr, args := info[3], info[4:10]
	var dirfd int32 = unix.AT_FDCWD
	var path uint64
	var flags uint64
	switch nr {
	case unix.SYS_EXECVE:
		path = args[0]
	case unix.SYS_EXECVEAT:
		dirfd, path, flags = int32(args[0]), args[1], args[4]
	default:
		return "", false
	}
	name := readString(tid, path)
	file := ""
	switch proc := fmt.Sprintf("/proc/%d", tid); {
	case name == "" && flags&unix.AT_EMPTY_PATH != 0:
		file = fmt.Sprintf("%s/fd/%d", proc, dirfd)
	case strings.HasPrefix(name, "/"):
		file = proc + "/root" + name
	case dirfd == unix.AT_FDCWD:
		file = proc + "/cwd/" + name
	default:
		file = fmt.Sprintf("%s/fd/%d/%s", proc, dirfd, name)
	}
	if !privileged(file) {
		return "", false
	}
	return name, true
}

// GainsPrivileges reports whether running file would gain privileges
// (setuid, setgid, file capabilities) that a process this one ptraces
// would not get: this process lacks CAP_SYS_PTRACE.
func GainsPrivileges(file string) bool { return privileged(file) && !capable() }

// privileged reports whether the executable file gains privileges when
// it runs: setuid, setgid, or file capabilities.
func privileged(file string) bool {
	var st unix.Stat_t
	if unix.Stat(file, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		return true
	}
	n, err := unix.Getxattr(file, "security.capability", nil)
	return err == nil && n > 0
}

// readString reads a NUL-terminated string of at most 4 KB at addr in
// thread tid's memory.
func readString(tid int, addr uint64) string {
	buf := make([]byte, msgText)
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	// A read that crosses into an unmapped page fails whole: a page at a
	// time.
	got := 0
	for got < len(buf) {
		n := int(4096 - (addr+uint64(got))%4096)
		n = min(n, len(buf)-got)
		local[0].Base, local[0].Len = &buf[got], uint64(n)
		remote := []unix.RemoteIovec{{Base: uintptr(addr) + uintptr(got), Len: n}}
		m, err := unix.ProcessVMReadv(tid, local, remote, 0)
		if err != nil || m <= 0 {
			break
		}
		if i := bytes.IndexByte(buf[got:got+m], 0); i >= 0 {
			return string(buf[:got+i])
		}
		got += m
	}
	return string(buf[:got])
}
