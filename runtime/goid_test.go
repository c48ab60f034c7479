package runtime

import (
	goruntime "runtime"
	"sync"
	"testing"
)

func TestParseGoroutineHeader(t *testing.T) {
	tests := []struct {
		in     string
		want   int64
		wantOK bool
	}{
		{"goroutine 1 [running]:\nmain.main()", 1, true},
		{"goroutine 7 [running]:", 7, true},
		{"goroutine 123456789 gp=0xc000002380 m=0 mp=0x5a8f20 [running]:", 123456789, true},
		{"goroutine 9223372036854775807 [running]:", 1<<63 - 1, true},
		{"goroutine 9223372036854775808 [running]:", 0, false},
		{"goroutine 99999999999999999999 [running]:", 0, false},
		{"goroutine 12", 0, false}, // cut short: the number may be partial
		{"goroutine  12 [running]:", 0, false},
		{"goroutine x [running]:", 0, false},
		{"goroutine 0 [running]:", 0, false},
		{"goroutine 12[running]:", 0, false},
		{"Goroutine 12 [running]:", 0, false},
		{"gorout", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseGoroutineHeader([]byte(tt.in))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseGoroutineHeader(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// tracebackGoid is the reference Goid is checked against, written
// independently of stackGoid so that a shared bug cannot hide.
func tracebackGoid(t testing.TB) int64 {
	t.Helper()
	buf := make([]byte, 128)
	buf = buf[:goruntime.Stack(buf, false)]
	var id int64
	rest := buf[len("goroutine "):]
	for _, c := range rest {
		if c == ' ' {
			return id
		}
		id = id*10 + int64(c-'0')
	}
	t.Fatalf("cannot parse traceback header %q", buf)
	return 0
}

func TestGoidMatchesTraceback(t *testing.T) {
	if got, want := Goid(), tracebackGoid(t); got != want {
		t.Errorf("Goid() = %d, traceback says %d", got, want)
	}
	if got, want := stackGoid(), tracebackGoid(t); got != want {
		t.Errorf("stackGoid() = %d, traceback says %d", got, want)
	}
}

// growStack recurses with large frames, so that the goroutine's stack is
// copied to a bigger one several times, then checks Goid at the bottom.
func growStack(depth int, check func()) byte {
	var pad [1024]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		check()
		return pad[0]
	}
	return growStack(depth-1, check) + pad[depth%len(pad)]
}

func TestGoidManyGoroutines(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(max(4, goruntime.NumCPU())))

	const n = 200
	start := make(chan struct{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = make(map[int64]bool)
	)
	for range n {
		wg.Go(func() {
			want := tracebackGoid(t)
			check := func(when string) {
				if got := Goid(); got != want {
					t.Errorf("%s: Goid() = %d, traceback says %d", when, got, want)
				}
			}
			// Released together, so that the first calls race with
			// calibration and with each other.
			<-start
			check("first call")
			goruntime.Gosched()
			check("after Gosched")
			growStack(256, func() { check("on a grown stack") })
			check("after the stack grew")
			for range 10 {
				goruntime.Gosched()
				check("after repeated Gosched")
			}
			mu.Lock()
			if seen[want] {
				t.Errorf("id %d seen twice among live goroutines", want)
			}
			seen[want] = true
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
}

func BenchmarkGoid(b *testing.B) {
	Goid() // calibrate outside the measurement
	var sum int64
	for b.Loop() {
		sum += Goid()
	}
	sinkInt64 = sum
}

func BenchmarkGoidParallel(b *testing.B) {
	Goid()
	b.RunParallel(func(pb *testing.PB) {
		var sum int64
		for pb.Next() {
			sum += Goid()
		}
		sinkInt64 = sum
	})
}

// BenchmarkStackGoid measures the fallback, to know what a failed
// calibration would cost.
func BenchmarkStackGoid(b *testing.B) {
	var sum int64
	for b.Loop() {
		sum += stackGoid()
	}
	sinkInt64 = sum
}

var sinkInt64 int64
