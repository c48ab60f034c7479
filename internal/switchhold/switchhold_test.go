package switchhold

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// holderEnv makes the test binary a tracer that holds a function of
// the process it names (pid:entry) and waits to be killed.
const holderEnv = "SWITCHHOLD_TEST_HOLDER"

func TestMain(m *testing.M) {
	if v := os.Getenv(holderEnv); v != "" {
		var pid int
		var entry uint64
		if _, err := fmt.Sscanf(v, "%d:%x", &pid, &entry); err != nil {
			panic(err)
		}
		h, err := Open(pid)
		if err == nil {
			err = h.Take(entry)
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
	others := func(h *Holds, entry uint64) bool {
		t.Helper()
		held, err := h.Others(entry)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	const f, g = 0x401000, 0x401040
	a, b := open(), open()
	if err := a.Take(f); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		h    *Holds
		at   uint64
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
	// Another process's function at the same entry is another byte.
	self, err := Open(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if others(self, f) {
		t.Errorf("a hold on process %d's %#x counts for process %d's", pid, f, os.Getpid())
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
	holder.Env = append(os.Environ(), holderEnv+"="+strconv.Itoa(pid)+":"+strconv.FormatUint(g, 16))
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
