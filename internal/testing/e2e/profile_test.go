package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// profileSrc spins in hot, which calls leaf, for two seconds (12 under
// emulation) with a CPU profile running, which it writes to the file its
// argument names.
const profileSrc = `package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"
)

func leaf(i int) int { return i*3 + 1 }

func hot(d time.Duration) int {
	s := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 1000 {
			s += leaf(i)
		}
	}
	return s
}

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	// Longer under emulation, where the profile takes fewer samples.
	slack, _ := strconv.Atoi(os.Getenv("` + tracetest.TimeSlackEnv + `"))
	pprof.StartCPUProfile(f)
	fmt.Println(hot(time.Duration(max(slack/5, 1))*2*time.Second) > 0)
	pprof.StopCPUProfile()
	f.Close()
}
`

// profileRules gives leaf an entry probe alone: its fire goes through a
// trampoline that calls the ring's writer.
const profileRules = `provider: profile
rules:
  - package: example.com/profile
    func: leaf
    probes: [entry]
`

// TestRingProfileUnwinds takes a CPU profile of a program whose probe
// records through the ring in every call of its hot loop: every sample
// taken inside the ring's writer unwinds through the probe's code to the
// probed function, then its caller, to main. On arm64 the trampoline
// that calls the writer kept its link register in a register, and the
// unwinder, which reads it from the frame, skipped the probed function
// and lost the frames above.
func TestRingProfileUnwinds(t *testing.T) {
	requireRing(t)
	bin := buildMainRules(t, target{}, "profile", profileSrc, profileRules)
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	_, errOut, err := usdtTrace(t, "-transport", "ring", "-stats", "--", bin, prof)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	inWriter := 0
	for _, s := range p.Sample {
		var names []string
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				names = append(names, line.Function.Name)
			}
		}
		// The ring's writer, or the probe's fire function.
		if len(names) == 0 || !strings.HasPrefix(names[0], "usdt/") && !strings.HasPrefix(names[0], "main.usdt") {
			continue
		}
		inWriter++
		// Past the probe's own code (the writer, the fire function,
		// the probed function's traced copy and what calls it), the
		// probed function, its caller, and main.
		var rest []string
		for _, n := range names {
			n = strings.TrimSuffix(n, "_usdtTraced")
			if strings.HasPrefix(n, "usdt/") || strings.HasPrefix(n, "main.usdt") || len(rest) > 0 && rest[len(rest)-1] == n {
				continue
			}
			rest = append(rest, n)
		}
		if len(rest) < 3 || rest[0] != "main.leaf" || rest[1] != "main.hot" || rest[2] != "main.main" {
			t.Errorf("a sample inside the probe unwinds as %s, want the probe's code, then main.leaf, main.hot and main.main", strings.Join(names, " < "))
		}
	}
	if inWriter < 1 {
		t.Errorf("%d of %d samples inside the probe's code: the test saw too few to check", inWriter, len(p.Sample))
	}
	t.Logf("%d of %d samples inside the probe's code", inWriter, len(p.Sample))
}
