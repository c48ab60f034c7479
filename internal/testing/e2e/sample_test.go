package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rootsProgram makes 2,000 calls of handle, each a root call (nothing
// traced is open on its goroutine, and it passes no traceparent) that
// calls step.
const rootsProgram = `package main

import "fmt"

func step(i int) int { return i * 2 }

func handle(i int) int { return step(i) + 1 }

func main() {
	sum := 0
	for i := range 2000 {
		sum += handle(i)
	}
	fmt.Println("sum", sum)
}
`

// TestTraceSample: with -sample 0.1, 10 % ± 3 % of 2,000 root calls have
// their traces in Jaeger, each whole (the root and its child), and trace
// says how many calls it did not send. Calls that join their caller's
// trace follow its sampled flag whatever -sample says: with -sample 0,
// every request whose traceparent's flags say sampled (01) has its
// trace, and none whose flags say not (00).
func TestTraceSample(t *testing.T) {
	requireAMD64(t)
	j := startJaeger(t)
	t.Run("roots", func(t *testing.T) {
		bin := buildMain(t, "roots", rootsProgram)
		_, errOut, err := usdtTrace(t, "-transport", "ring", "-otlp", j.otlp, "-service", "sampled-e2e", "-sample", "0.1", "--", bin)
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, errOut)
		}
		const roots, min, max = 2000, 140, 260
		traces := j.traces(t, "sampled-e2e", min)
		if len(traces) < min || len(traces) > max {
			t.Errorf("Jaeger has %d traces of %d root calls sampled at 0.1, want %d to %d", len(traces), roots, min, max)
		}
		for id, spans := range traces {
			if len(spans) != 2 {
				t.Errorf("trace %s has %d spans, want main.handle's and main.step's", id, len(spans))
			}
		}
		m := regexp.MustCompile(`(\d+) calls were in traces that -sample did not sample: no span`).FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("trace does not say how many calls -sample left out:\n%s", errOut)
		}
		if n, _ := strconv.Atoi(m[1]); n != 2*(roots-len(traces)) {
			t.Errorf("trace says -sample left out %d calls; Jaeger has %d traces of 2 calls of %d roots, so %d", n, len(traces), roots, 2*(roots-len(traces)))
		}
	})
	t.Run("joined", func(t *testing.T) {
		dir := fixture(t, "joined")
		bin := filepath.Join(t.TempDir(), "joined")
		goCmd(t, dir, buildEnv(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
		_, errOut, err := usdtTrace(t, "-transport", "ring", "-otlp", j.otlp, "-service", "joined-sample-e2e", "-sample", "0", "--", bin)
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, errOut)
		}
		// As TestTraceContext's: every tenth request, from the fifth,
		// is not sampled by its caller.
		const requests, unsampled = 200, 20
		traces := j.traces(t, "joined-sample-e2e", requests-unsampled)
		for i := range requests {
			traceID := fmt.Sprintf("4bf92f3577b34da6a3ce929d%06x00", i)
			_, has := traces[traceID]
			if want := i%10 != 5; has != want {
				t.Errorf("request %d (caller sampled: %v) has a trace in Jaeger: %v", i, want, has)
			}
		}
		if len(traces) != requests-unsampled || strings.Contains(errOut, "-sample did not sample") {
			t.Errorf("Jaeger has %d traces, want %d, and trace's stderr says -sample left some out:\n%s", len(traces), requests-unsampled, errOut)
		}
	})
}
