package textpatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Options bound Switch and Restore.
type Options struct {
	// Wait is how long a thread may take to stop: 1 s when 0.
	Wait time.Duration
	// Budget bounds one stop of the program, from its first seize to
	// its last write: the patches past it wait for the next stop, so
	// that switching thousands of functions stops the program a few
	// milliseconds at a time. A stop whose threads took most of it to
	// stop still writes for a quarter of it. 6 ms when 0: with the
	// tenths of a millisecond that letting the threads go takes, a stop
	// stays within 10 ms (issue 51's goal) where stopping them takes
	// 4.5 ms at most.
	Budget time.Duration
	// Tries is how many times the program is stopped for the patches
	// that a thread was inside of: 20 when 0, 1 ms apart.
	Tries int
	// Keep, for Restore, says which of ps another tracer still wants
	// switched (internal/switchhold): those stay, Kept. It is asked once
	// a stop of the program, while every thread is stopped, of the
	// patches that the stop may write.
	Keep func(ps []*Patch) (keep []bool, err error)
	// pause, in tests, runs between the steps of a write (see Steps).
	pause func(step string)
}

// Steps are the moments inside one stop of the program, in order, at
// which a tracer may die: the tests kill one at each.
var Steps = []string{"stopped", "one written", "all written"}

// An Outcome is what became of one patch.
type Outcome int

const (
	Switched        Outcome = iota + 1
	Restored                // the plain function's bytes are back
	AlreadySwitched         // by another tracer, whose switch it stays
	AlreadyRestored
	Busy    // a thread stayed inside the bytes at every try
	Changed // the bytes are neither the plain nor the switched ones
	Kept    // switched still, as another tracer wants it (Options.Keep)
)

var outcomes = [...]string{Switched: "switched", Restored: "restored", AlreadySwitched: "already switched", AlreadyRestored: "already restored", Busy: "busy", Changed: "changed", Kept: "kept for another tracer"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomes) {
		return outcomes[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// A Result is one patch's outcome, with why for Busy and Changed, and
// for Kept where Options.Keep could not tell.
type Result struct {
	Outcome Outcome
	Why     string
}

// A Report says what Switch or Restore did.
type Report struct {
	Results []Result // one per patch, in order
	// Stops is how many times the program was stopped, and Longest the
	// longest stop, from the first seize to the last thread let go.
	Stops   int
	Longest time.Duration
	// LongestParts is where the longest stop's time went, and AllParts
	// where all the stops' went.
	LongestParts, AllParts StopParts
	Threads                int // in the last stop
}

// StopParts divide one stop of the program: Stopping, from the first
// seize to the last thread seen stopped; Writing, the patches' reads and
// writes (and Options.Keep); Resuming, letting every thread go on.
type StopParts struct {
	Stopping, Writing, Resuming time.Duration
	Written                     int // patches written or found written
}

func (a *StopParts) add(b StopParts) {
	a.Stopping += b.Stopping
	a.Writing += b.Writing
	a.Resuming += b.Resuming
	a.Written += b.Written
}

// StopsText says how often, and how long at most, the writes stopped the
// program, and where the longest stop's time went, and all the stops'.
func (r Report) StopsText() string {
	l := r.LongestParts
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	a := r.AllParts
	return fmt.Sprintf("%d stops of the program, the longest %v: %v stopping %d threads, %v writing %d functions, %v letting them go; in all %v stopping, %v writing, %v letting go",
		r.Stops, us(r.Longest), us(l.Stopping), r.Threads, us(l.Writing), l.Written, us(l.Resuming), us(a.Stopping), us(a.Writing), us(a.Resuming))
}

// Switch writes the patches into process pid: each function then runs
// its Target. It needs what ptrace needs: the process is this user's
// (and Yama allows it), or this process has CAP_SYS_PTRACE.
func Switch(pid int, patches []Patch, opt Options) (Report, error) {
	return write(pid, patches, true, opt)
}

// Restore takes back the patches Switch wrote (those it reported
// Switched): each function then runs its own code again.
func Restore(pid int, patches []Patch, opt Options) (Report, error) {
	return write(pid, patches, false, opt)
}

// SwitchHeld writes the patches into process pid, which this thread
// holds stopped, with its only thread, as a tracer holds a process it
// seized at its exec.
func SwitchHeld(pid int, patches []Patch) (Report, error) {
	rep := Report{Results: make([]Result, len(patches)), Stops: 1, Threads: 1}
	mem, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/mem", os.O_RDWR, 0)
	if err != nil {
		return rep, fmt.Errorf("process %d: %w", pid, err)
	}
	defer mem.Close()
	for i := range patches {
		rep.Results[i] = apply(mem, &patches[i], true, func(string) {}, nil)
	}
	return rep, nil
}

func write(pid int, patches []Patch, on bool, opt Options) (Report, error) {
	if opt.Wait == 0 {
		opt.Wait = time.Second
	}
	if opt.Tries == 0 {
		opt.Tries = 20
	}
	if opt.Budget == 0 {
		opt.Budget = 6 * time.Millisecond
	}
	pause := opt.pause
	if pause == nil {
		pause = func(string) {}
	}
	rep := Report{Results: make([]Result, len(patches))}
	mem, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/mem", os.O_RDWR, 0)
	if err != nil {
		return rep, fmt.Errorf("process %d: %w", pid, err)
	}
	defer mem.Close()
	// ptrace's requests come from the thread that seized.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var urgent urgency
	todo := make([]int, len(patches))
	for i := range todo {
		todo[i] = i
	}
	for try := 0; len(todo) > 0; {
		if try == opt.Tries {
			for _, i := range todo {
				rep.Results[i] = Result{Busy, fmt.Sprintf("a thread was inside the bytes at each of %d tries", opt.Tries)}
			}
			break
		}
		start := time.Now()
		urgent.raise()
		w, err := stop(pid, opt.Wait)
		// Another tracer that writes its switches holds the process
		// for a few milliseconds: it is waited for, up to Wait.
		for seizing := start; errors.Is(err, unix.EPERM) && time.Since(seizing) < opt.Wait; {
			urgent.lower()
			time.Sleep(2 * time.Millisecond)
			start = time.Now()
			urgent.raise()
			w, err = stop(pid, opt.Wait)
		}
		if err != nil {
			urgent.lower()
			return rep, err
		}
		rep.Stops++
		rep.Threads = len(w.threads)
		pause("stopped")
		// Each stop writes one patch at least, whatever the stop took.
		writing := time.Now()
		parts := StopParts{Stopping: writing.Sub(start)}
		var keep []bool
		if !on && opt.Keep != nil {
			ps := make([]*Patch, len(todo))
			for n, i := range todo {
				ps[n] = &patches[i]
			}
			if keep, err = opt.Keep(ps); err != nil {
				for _, i := range todo {
					rep.Results[i] = Result{Kept, err.Error()}
				}
				w.resume()
				urgent.lower()
				break
			}
		}
		var busy, later []int
		ahead := readAhead{pid: pid, patches: patches, todo: todo}
		budget := max(opt.Budget/4, opt.Budget-parts.Stopping)
		for n, i := range todo {
			if n > 0 && time.Since(writing) > budget {
				later = todo[n:]
				break
			}
			p := &patches[i]
			if w.inside(p) {
				busy = append(busy, i)
				continue
			}
			if keep != nil && keep[n] {
				rep.Results[i] = Result{Outcome: Kept}
				continue
			}
			rep.Results[i] = apply(mem, p, on, pause, ahead.bytes(n))
			parts.Written++
		}
		resuming := time.Now()
		parts.Writing = resuming.Sub(writing)
		w.resume()
		resumed := time.Now()
		parts.Resuming = resumed.Sub(resuming)
		// The stop ends as the last thread goes on, before this thread
		// gives up its priority, and maybe its CPU to them.
		urgent.lower()
		rep.AllParts.add(parts)
		if took := resumed.Sub(start); took > rep.Longest {
			rep.Longest, rep.LongestParts = took, parts
		}
		todo = append(slices.Clip(later), busy...)
		// A stop cut short by the budget is no try: only one that
		// found a thread inside every patch left is.
		if len(later) == 0 && len(busy) > 0 {
			try++
			time.Sleep(time.Millisecond)
		}
	}
	return rep, nil
}

// inside reports whether a stopped thread's next instruction starts
// inside the bytes of one of p's writes. It never does (see Write): the
// check guards against a plan that breaks that promise.
func (w *world) inside(p *Patch) bool {
	for _, t := range w.threads {
		for _, wr := range p.Writes {
			if t.pc > wr.At && t.pc < wr.At+uint64(len(wr.New)) {
				return true
			}
		}
	}
	return false
}

// apply makes one patch's writes into a stopped process's memory, mem:
// in order to switch, in the reverse order to restore. A patch that a
// tracer killed between two writes left half done is finished. read,
// when not nil, holds the bytes at each of p's writes, read in this stop
// (readAhead); else they are read from mem.
func apply(mem *os.File, p *Patch, on bool, pause func(string), read [][]byte) Result {
	// Nothing here allocates where the bytes were read ahead: a stop
	// writes hundreds of patches, and a goroutine that allocates while
	// the collector runs helps it, with the program stopped (trace's
	// heap is the binary's tables, hundreds of MB for Caddy).
	fd, n := mem.Fd(), len(p.Writes)
	if read == nil {
		read = make([][]byte, n)
		for k, w := range p.Writes {
			read[k] = make([]byte, len(w.New))
			if err := pread(fd, read[k], int64(w.At)); err != nil {
				return Result{Changed, fmt.Sprintf("read %#x: %v", w.At, err)}
			}
		}
	}
	// The writes in order to switch, in the reverse order to restore.
	nth := func(i int) int {
		if on {
			return i
		}
		return n - 1 - i
	}
	var todoArr [4]int
	todo := todoArr[:0] // the writes to make, by index
	for i := range n {
		k := nth(i)
		w := &p.Writes[k]
		from, to := w.Old, w.New
		if !on {
			from, to = w.New, w.Old
		}
		switch cur := read[k]; {
		case bytes.Equal(cur, to):
		case bytes.Equal(cur, from):
			todo = append(todo, k)
		default:
			return Result{Changed, fmt.Sprintf("the bytes at %#x are % x, neither the function's (% x) nor the switch's (% x): another tool wrote them", w.At, cur, w.Old, w.New)}
		}
	}
	if len(todo) == 0 {
		if on {
			return Result{Outcome: AlreadySwitched}
		}
		return Result{Outcome: AlreadyRestored}
	}
	for i, k := range todo {
		w := &p.Writes[k]
		to := w.New
		if !on {
			to = w.Old
		}
		if err := pwrite(fd, to, int64(w.At)); err != nil {
			return Result{Changed, fmt.Sprintf("write %#x: %v", w.At, err)}
		}
		if i+1 < len(todo) {
			pause("one written")
		}
	}
	pause("all written")
	if on {
		return Result{Outcome: Switched}
	}
	return Result{Outcome: Restored}
}

// readAhead reads the bytes at the writes of a stop's patches, todo's,
// a chunk of them in one process_vm_readv, rather than one pread of
// /proc/PID/mem for each write: a stop reads up to twice as many
// functions' bytes as it writes within its budget.
type readAhead struct {
	pid      int
	patches  []Patch
	todo     []int
	from, to int        // the chunk read: todo[from:to]
	chunk    [][][]byte // its bytes, a slice a patch, one a write
}

// chunkPatches bounds a chunk, and iovMax its writes (IOV_MAX).
const chunkPatches, iovMax = 256, 1024

// bytes are the bytes at the writes of patches[todo[n]], or nil where
// they could not be read this way: apply reads them itself then.
func (r *readAhead) bytes(n int) [][]byte {
	if n < r.from || n >= r.to {
		r.read(n)
	}
	if n < r.from || n >= r.to {
		return nil
	}
	return r.chunk[n-r.from]
}

func (r *readAhead) read(n int) {
	r.from, r.to = n, n
	end := min(len(r.todo), n+chunkPatches)
	var remote []unix.RemoteIovec
	size, count := 0, 0
	for _, i := range r.todo[n:end] {
		ws := r.patches[i].Writes
		if len(remote)+len(ws) > iovMax {
			break
		}
		for _, w := range ws {
			remote = append(remote, unix.RemoteIovec{Base: uintptr(w.At), Len: len(w.New)})
			size += len(w.New)
		}
		count++
	}
	end = n + count
	if size == 0 {
		return
	}
	buf := make([]byte, size)
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(size)
	got, err := processVMReadv(r.pid, local, remote)
	if err != nil || got != size {
		// Unreadable this way (a partial read stops at the first
		// remote iovec it cannot read): each patch reads its own.
		return
	}
	r.chunk = r.chunk[:0]
	flat := make([][]byte, len(remote)) // every patch's slices, in one
	for _, i := range r.todo[n:end] {
		ws := flat[:len(r.patches[i].Writes):len(r.patches[i].Writes)]
		flat = flat[len(ws):]
		for k, w := range r.patches[i].Writes {
			ws[k], buf = buf[:len(w.New):len(w.New)], buf[len(w.New):]
		}
		r.chunk = append(r.chunk, ws)
	}
	r.to = end
}
