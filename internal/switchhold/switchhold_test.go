package switchhold

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// holderEnv makes the test binary a tracer that holds a function of
// the process it names (pid:entry) and waits to be killed.
const holderEnv = "SWITCHHOLD_TEST_HOLDER"

func TestMain(m *testing.M) {
	if v := os.Getenv(holderEnv); v != "" {
		var pid, index int
		if _, err := fmt.Sscanf(v, "%d:%d", &pid, &index); err != nil {
			panic(err)
		}
		h, err := Open(pid)
		if err == nil {
			err = h.Take(index)
		}
		if err != nil {
			panic(err)
		}
		fmt.Println("held")
		select {}
	}
	os.Exit(m.Run())
}

// TestHolds: a tracer sees another's hold on a function, not its own
// nor one on another function or of another process; the hold goes
// when its tracer lets it go, closes, or is killed.
func TestHolds(t *testing.T) {
	prog := exec.Command("sleep", "60")
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Process.Kill(); prog.Wait() })
	pid := prog.Process.Pid
	open := func() *Holds {
		t.Helper()
		h, err := Open(pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	others := func(h *Holds, index int) bool {
		t.Helper()
		held, err := h.Others(index)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	const f, g = 7, 9
	a, b := open(), open()
	if err := a.Take(f); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		h    *Holds
		at   int
		want bool
	}{
		{"b asks of f, which a holds", b, f, true},
		{"a asks of f, which a alone holds", a, f, false},
		{"b asks of g", b, g, false},
	} {
		if got := others(c.h, c.at); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	// Another process's function of the same index is another byte.
	self, err := Open(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if others(self, f) {
		t.Errorf("a hold on process %d's function %d counts for process %d's", pid, f, os.Getpid())
	}
	// Two holders of f: b's does not go with a's.
	if err := b.Take(f); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(f); err != nil {
		t.Fatal(err)
	}
	if !others(a, f) || others(b, f) {
		t.Errorf("after a let f go: a sees b's hold %v (want true), b sees another %v (want false)", others(a, f), others(b, f))
	}
	b.Close()
	if others(a, f) {
		t.Error("b closed: its hold stays")
	}

	// A tracer killed holds nothing.
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), holderEnv+"="+strconv.Itoa(pid)+":"+strconv.Itoa(g))
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(out).ReadString('\n'); l != "held\n" {
		holder.Process.Kill()
		t.Fatalf("the holder said %q (%v)", l, err)
	}
	if !others(a, g) {
		t.Error("the holder's hold on g is not seen")
	}
	holder.Process.Kill()
	holder.Wait()
	if others(a, g) {
		t.Error("the holder was killed: its hold stays")
	}
}

// TestHoldRuns: functions taken as a run are held each, and one let go
// of the run goes alone; 8,000 of them take a few locks, not 8,000.
func TestHoldRuns(t *testing.T) {
	a, err := Open(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var run []int
	for i := range 8000 {
		run = append(run, 3*(i/1000)+i) // runs of 1,000, 2 apart
	}
	start := time.Now()
	if err := a.Take(run...); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for _, c := range []struct {
		index int
		want  bool
	}{{0, true}, {999, true}, {1000, false}, {1001, false}, {1003, true}, {run[len(run)-1], true}, {run[len(run)-1] + 1, false}} {
		if got, err := b.Others(c.index); err != nil || got != c.want {
			t.Errorf("function %d: held %v (%v), want %v", c.index, got, err, c.want)
		}
	}
	if err := a.Release(500); err != nil {
		t.Fatal(err)
	}
	if held, _ := b.Others(500); held {
		t.Error("function 500, let go, is held still")
	}
	if held, _ := b.Others(501); !held {
		t.Error("function 501 went with 500")
	}
	t.Logf("8,000 functions in 8 runs held in %v", took)
}
