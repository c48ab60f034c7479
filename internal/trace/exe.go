package trace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-usdt/usdt/internal/metrics"
	"github.com/go-usdt/usdt/internal/procstat"
	"github.com/go-usdt/usdt/internal/values"
)

// exeScanEvery is how often RunExe looks in /proc for processes of the
// executable that it does not trace yet: a process that starts is traced
// from about this long after its start.
const exeScanEvery = 100 * time.Millisecond

// RunExe is trace -exe: it traces every process that runs the executable
// opt.Exe, those that run when it starts and those that start later (a
// restart, a second replica), each as -p would, from when it finds it in
// /proc until it exits; until interrupted. A process it may not trace,
// or that fails, is said so on stderr and does not stop the others. The
// lines of the processes' events go to opt.Stdout whole; with Stats,
// each process's counts go there at its end, under a line naming it.
func RunExe(opt Options) error {
	exe, err := newExeMatcher(opt.Exe)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The exporters take the events of every process from one
	// goroutine at a time, and what the processes' sampling left out.
	var evMu sync.Mutex
	if events := opt.Events; events != nil {
		opt.Events = func(ev *Event) {
			evMu.Lock()
			defer evMu.Unlock()
			events(ev)
		}
	}
	if counted := opt.Counted; counted != nil {
		opt.Counted = func(c Counted) {
			evMu.Lock()
			defer evMu.Unlock()
			counted(c)
		}
	}
	if leftOut := opt.LeftOut; leftOut != nil {
		opt.LeftOut = func(calls, byCaller uint64) {
			evMu.Lock()
			defer evMu.Unlock()
			leftOut(calls, byCaller)
		}
	}
	// The metrics exporters take the counts of every process as one,
	// that only grow as processes come and go.
	var counts *exeCounts
	if opt.Counts != nil {
		counts = &exeCounts{live: map[int]*metrics.Snapshot{}, out: opt.Counts}
		opt.Counts(&metrics.Snapshot{})
	}
	var mu sync.Mutex // the output's
	stderr := &lineWriter{mu: &mu, w: opt.Stderr}
	var wg sync.WaitGroup
	// The processes traced or tried, by pid and start time (a pid that
	// another process takes is that process's), until they are gone: a
	// process whose trace failed is not tried again.
	tried := map[procKey]bool{}
	var triedMu sync.Mutex
	scan := func() {
		triedMu.Lock()
		for key := range tried {
			if now, ok := procKeyOf(key.pid); !ok || now != key {
				delete(tried, key)
			}
		}
		triedMu.Unlock()
		for _, pid := range exe.processes() {
			key, ok := procKeyOf(pid)
			triedMu.Lock()
			if !ok || tried[key] {
				triedMu.Unlock()
				continue
			}
			tried[key] = true
			triedMu.Unlock()
			o := opt
			o.Exe, o.PID, o.Binary = "", pid, fmt.Sprintf("/proc/%d/exe", pid)
			o.Stderr = stderr
			if counts != nil {
				o.Counts = func(snap *metrics.Snapshot) { counts.update(pid, snap) }
			}
			var stats bytes.Buffer
			if opt.Stats {
				o.Stdout = &stats
			} else {
				o.Stdout = &lineWriter{mu: &mu, w: opt.Stdout}
			}
			fmt.Fprintf(stderr, "usdt-toolexec trace: process %d runs %s: tracing it\n", pid, values.Escape(opt.Exe))
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := Run(o)
				if counts != nil {
					counts.end(pid)
				}
				if err != nil {
					fmt.Fprintf(stderr, "usdt-toolexec trace: process %d: %s\n", pid, values.EscapeLines(err.Error()))
				}
				if opt.Stats && stats.Len() > 0 {
					mu.Lock()
					fmt.Fprintf(opt.Stdout, "process %d:\n", pid)
					opt.Stdout.Write(stats.Bytes())
					mu.Unlock()
				}
				if w, ok := o.Stdout.(*lineWriter); ok {
					w.Flush()
				}
			}()
		}
	}
	tick := time.NewTicker(exeScanEvery)
	defer tick.Stop()
	for scan(); ; scan() {
		select {
		case <-ctx.Done():
			// Each process's trace ends on the same interrupt.
			wg.Wait()
			stderr.Flush()
			return nil
		case <-tick.C:
		}
	}
}

// exeCounts adds up the counts of -exe's processes for Options.Counts:
// those of the processes that ended, and the latest of each that runs,
// so that a counter only grows as processes come and go (a restart does
// not take it back to zero), and Processes says how many run.
type exeCounts struct {
	mu    sync.Mutex
	ended *metrics.Snapshot
	live  map[int]*metrics.Snapshot // by pid
	out   func(*metrics.Snapshot)
}

// update takes the latest counts of process pid.
func (c *exeCounts) update(pid int, snap *metrics.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live[pid] = snap
	c.send()
}

// end adds the last counts of process pid, whose trace has ended, to
// those of the processes that ended.
func (c *exeCounts) end(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last := c.live[pid]; last != nil {
		gone := *last
		gone.Processes = 0
		c.ended = metrics.Sum(c.ended, &gone)
	}
	delete(c.live, pid)
	c.send()
}

func (c *exeCounts) send() {
	snaps := []*metrics.Snapshot{c.ended}
	for _, s := range c.live {
		snaps = append(snaps, s)
	}
	c.out(metrics.Sum(snaps...))
}

// procKey is a process: its pid, and when it started (a pid's next
// process starts later).
type procKey struct {
	pid   int
	start string
}

// procKeyOf is the key of process pid; ok is false once it is gone.
func procKeyOf(pid int) (procKey, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procKey{}, false
	}
	start, ok := procstat.StartTime(b)
	return procKey{pid, start}, ok
}

// exeMatcher tells the processes that run an executable, given by its
// absolute path: the file at that path in trace's own root, under any
// name (a link, a bind mount), or the file at that path in the
// process's own root, as a process in a container or a chroot names
// its executable.
type exeMatcher struct {
	path string
	file os.FileInfo // the file at path here; nil when there is none
}

// newExeMatcher matches the processes of the executable at path, which
// need not exist in trace's own root when it is absolute.
func newExeMatcher(path string) (exeMatcher, error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		return exeMatcher{path: path, file: fi}, nil
	case errors.Is(err, fs.ErrNotExist) && filepath.IsAbs(path):
		return exeMatcher{path: filepath.Clean(path)}, nil
	}
	return exeMatcher{}, err
}

// matches reports whether process pid runs the executable. A process
// trace may not inspect (another user's, without CAP_SYS_PTRACE) never
// matches.
func (m exeMatcher) matches(pid int) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	exe, err := os.Stat(proc + "/exe")
	if err != nil {
		return false
	}
	if m.file != nil && os.SameFile(exe, m.file) {
		return true
	}
	in, err := os.Stat(proc + "/root" + m.path)
	return err == nil && os.SameFile(exe, in)
}

// processes are the processes that run the executable now, but trace.
func (m exeMatcher) processes() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if m.matches(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// lineWriter writes to w whole lines only, under mu, which the writers
// of processes traced at once share, so that their lines do not tear one
// another; Flush writes what is left.
type lineWriter struct {
	mu  *sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		_, err := l.w.Write(l.buf[:i+1])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
		if err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// Flush writes what is left.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.w.Write(l.buf)
		l.buf = l.buf[:0]
	}
}
