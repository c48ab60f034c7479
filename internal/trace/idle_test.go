package trace

import (
	"os/exec"
	"testing"
	"time"
)

// TestIdleWatch paces a reader of a process that sleeps, then spins: the
// usual pace until idleAfter polls in a row found it idle, idleEvery
// then, and the usual pace again at the first poll after it ran; never
// slower where the reader may not slow, nor for a process it cannot see.
func TestIdleWatch(t *testing.T) {
	// The shell sleeps until its stdin has a line, then spins.
	cmd := exec.Command("sh", "-c", `read x; i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done`)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	const normal = 20 * time.Millisecond
	w, pid := idleWatch{}, cmd.Process.Pid
	// The shell's start may take a few polls to settle into its read.
	var got []time.Duration
	deadline := time.Now().Add(10 * time.Second)
	for len(got) == 0 || got[len(got)-1] != idleEvery {
		if time.Now().After(deadline) {
			t.Fatalf("a process asleep on its stdin was never found idle: %v", got)
		}
		got = append(got, w.every(cpuTime(pid), normal, true))
		time.Sleep(normal)
	}
	// The first poll finds the CPU time new; idleAfter more in a row
	// find it still.
	if len(got) < idleAfter+1 {
		t.Fatalf("slowed after %d polls, want %d at least: %v", len(got), idleAfter+1, got)
	}
	if d := w.every(cpuTime(pid), normal, true); d != idleEvery {
		t.Fatalf("the next poll of a process still asleep: %v, want %v", d, idleEvery)
	}
	if d := (&idleWatch{cpu: w.cpu, still: w.still}).every(cpuTime(pid), normal, false); d != normal {
		t.Errorf("a reader that may not slow: %v, want %v", d, normal)
	}
	in.Write([]byte("go\n"))
	time.Sleep(50 * time.Millisecond)
	if d := w.every(cpuTime(pid), normal, true); d != normal {
		t.Errorf("the first poll after the process ran: %v, want %v", d, normal)
	}
	gone := idleWatch{}
	for range idleAfter + 1 {
		if d := gone.every(cpuTime(1<<22+1), normal, true); d != normal {
			t.Fatalf("a process whose CPU time cannot be read: %v, want %v", d, normal)
		}
	}
}
