package procstat

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestStartTime(t *testing.T) {
	for _, tc := range []struct {
		name, stat, start string
		ok                bool
	}{
		{"plain", "4242 (life) S 1 4242 4242 0 -1 4194560 120 0 0 0 0 0 0 0 20 0 3 0 987654 1234 56", "987654", true},
		{"spaces and parentheses in the name", "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 120 0 0 0 0 0 0 0 20 0 3 0 555 1234 56", "555", true},
		{"cut short", "4242 (life) S 1 4242", "", false},
		{"no name", "4242 life S 1", "", false},
		{"empty", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, ok := StartTime([]byte(tc.stat))
			if start != tc.start || ok != tc.ok {
				t.Errorf("StartTime(%q) = %q, %v, want %q, %v", tc.stat, start, ok, tc.start, tc.ok)
			}
		})
	}
}

func TestState(t *testing.T) {
	for _, tc := range []struct{ stat, state string }{
		{"4242 (life) S 1 4242", "S"},
		{"4242 (a) t (c) t 1", "t"},
		{"4242 (life)", ""},
		{"4242 life S", ""},
	} {
		if state, ok := State([]byte(tc.stat)); state != tc.state || ok != (tc.state != "") {
			t.Errorf("State(%q) = %q, %v, want %q", tc.stat, state, ok, tc.state)
		}
	}
}

// FuzzStartTime: any bytes give a start time from after the last
// parenthesis, or none, never a panic.
func FuzzStartTime(f *testing.F) {
	f.Add([]byte("4242 (life) S 1 4242 4242 0 -1 4194560 120 0 0 0 0 0 0 0 20 0 3 0 987654 1234 56"))
	f.Add([]byte("1 ()) S"))
	f.Fuzz(func(t *testing.T, b []byte) {
		start, ok := StartTime(b)
		if ok && (start == "" || strings.ContainsAny(start, " \t\n")) {
			t.Fatalf("StartTime(%q) = %q", b, start)
		}
	})
}

// TestCPUTime reads the CPU clock of a child that spins and then sleeps:
// it grows while the child spins, and stands still while it sleeps.
func TestCPUTime(t *testing.T) {
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 30`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	first, err := CPUTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var last time.Duration
	for {
		now, err := CPUTime(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if now < last {
			t.Fatalf("the CPU time went back, from %v to %v", last, now)
		}
		// Asleep (sleep's own exec takes some time): unchanged over
		// 300 ms.
		if now == last {
			time.Sleep(300 * time.Millisecond)
			if again, err := CPUTime(cmd.Process.Pid); err != nil || again != now {
				last = again
				continue
			}
			break
		}
		last = now
		time.Sleep(20 * time.Millisecond)
	}
	if last <= first {
		t.Errorf("the CPU time of a child that spun went from %v to %v", first, last)
	}
	if own, err := CPUTime(os.Getpid()); err != nil || own <= 0 {
		t.Errorf("CPUTime of this test's own process: %v, %v", own, err)
	}
	if _, err := CPUTime(1<<22 + 1); err == nil {
		t.Error("CPUTime of a pid past the kernel's limit: no error")
	}
}
