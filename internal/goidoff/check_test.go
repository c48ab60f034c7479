//go:build amd64

package goidoff

import (
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func getg() unsafe.Pointer

func goidAt(off int64) int64 { return *(*int64)(unsafe.Add(getg(), off)) }

func stackGoid() int64 {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, _ := strconv.ParseInt(s[:strings.IndexByte(s, ' ')], 10, 64)
	return id
}

// TestOffsetMatchesRunningGoroutine reads the goid at the computed offset
// of this goroutine's g and compares it with the id in a stack trace.
func TestOffsetMatchesRunningGoroutine(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	off, err := Offset(goroot(t), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Offset(goroot(t), runtime.GOARCH)
	if err != nil || again != off {
		t.Fatalf("cached offset %d (%v), first %d", again, err, off)
	}
	for range 3 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if got, want := goidAt(off), stackGoid(); got != want {
				t.Errorf("goid at offset %d is %d, stack trace says %d", off, got, want)
			}
		}()
		<-done
	}
}

// TestPOffsetsFindRunningP follows g.m.p from this goroutine's g: the P
// found must be running (its status, after its id, is _Prunning) and have
// an id below GOMAXPROCS, on every P the goroutines land on.
func TestPOffsetsFindRunningP(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	off, err := POffsets(goroot(t), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	const running = 1 // runtime._Prunning
	procs := runtime.GOMAXPROCS(0)
	for range 8 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Gettid and the read of m must see one thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			m := *(*unsafe.Pointer)(unsafe.Add(getg(), off.GM))
			p := *(*unsafe.Pointer)(unsafe.Add(m, off.MP))
			id := *(*int32)(unsafe.Add(p, off.ID))
			status := *(*uint32)(unsafe.Add(p, off.ID+4))
			if id < 0 || int(id) >= procs || status != running {
				t.Errorf("P at offsets %+v: id %d of %d Ps, status %d", off, id, procs, status)
			}
			if tid := *(*uint64)(unsafe.Add(m, off.Procid)); tid != uint64(syscall.Gettid()) {
				t.Errorf("M at offsets %+v: thread %d, want %d", off, tid, syscall.Gettid())
			}
		}()
		<-done
	}
}
