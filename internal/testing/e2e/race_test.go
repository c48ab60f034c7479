package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// USDT_E2E_RACE=1 (make race) builds usdt-toolexec and usdt-export with
// -race; usdtgen and the fixture programs stay as they are.
func raceTools() bool { return os.Getenv("USDT_E2E_RACE") == "1" }

// raceSlack is tracetest.TimeSlack for the race pass, where
// $USDT_TIME_SLACK does not set it: under the race detector trace
// decodes several times slower (it took 2.6 to 4 s, not 0.3 to 0.5, to
// end TestTraceInterruptBusy's trace, against a limit of 5).
const raceSlack = 4

// raceDir holds the race detector's reports, one file a process that
// found a race (race.PID), while raceTools.
var raceDir string

// startRaceReports makes the directory the reports go to and sets GORACE
// for every process the tests start: the race detector writes each
// report there, not to stderr, stops the process at its first race and
// makes it exit 66. It does not sleep a second at exit
// (atexit_sleep_ms), as it would by default: trace must end within a
// second of a process traced with -p. A report cannot pass unseen whatever a test does
// with the tracer's output and exit status: raceReported fails the run
// on any file there. A GORACE of the caller's goes in too, but cannot
// move the reports elsewhere.
func startRaceReports() (string, error) {
	dir, err := os.MkdirTemp("", "usdt-e2e-race-")
	if err != nil {
		return "", err
	}
	// The tracer also runs as nobody (setpriv).
	if err := os.Chmod(dir, 0o1777); err != nil {
		return "", err
	}
	raceDir = dir
	if os.Getenv(tracetest.TimeSlackEnv) == "" {
		tracetest.TimeSlack = raceSlack
	}
	gorace := strings.TrimSpace("exitcode=66 halt_on_error=1 atexit_sleep_ms=0 " + os.Getenv("GORACE") + " log_path=" + filepath.Join(dir, "race"))
	return dir, os.Setenv("GORACE", gorace)
}

// raceReported prints the reports in raceDir, if any, and says whether
// there were any.
func raceReported() bool {
	files, _ := filepath.Glob(filepath.Join(raceDir, "race*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			b = []byte(err.Error())
		}
		fmt.Fprintf(os.Stderr, "e2e: a race report (%s):\n%s\n", filepath.Base(f), b)
	}
	if len(files) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d processes built with -race reported a data race\n", len(files))
	}
	return len(files) > 0
}
