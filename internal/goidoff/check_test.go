//go:build amd64

package goidoff

import (
	"runtime"
	"strconv"
	"strings"
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
