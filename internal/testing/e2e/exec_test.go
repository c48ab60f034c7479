package e2e

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// TestRingExec traces a program that runs another executable, with -p
// and as the command (-- CMD): trace writes nothing to the new image and
// prints the counts of the old; with -p it says that the process ran
// another executable and ends, and with -- CMD, whose exec stops its
// threads at their exits as an exit does, it waits for the command and
// exits with its status.
func TestRingExec(t *testing.T) {
	requireRing(t)
	bin := buildMain(t, "pidexit", pidExitProgram)
	check := func(t *testing.T, out, errOut string) {
		t.Helper()
		if got := statCounts(out)["main.work"]; got != 5 {
			t.Errorf("trace counted %d calls of main.work, want 5:\n%s\n%s", got, out, errOut)
		}
	}
	t.Run("p", func(t *testing.T) {
		prog, in, _ := startReady(t, bin, "exec")
		var out strings.Builder
		tr, _, trErr := traceAttached(t, &out, "-v", "-transport", "ring", "-stats", "-p", fmt.Sprint(prog.Process.Pid))
		var errOut strings.Builder
		copied := make(chan struct{})
		go func() { io.Copy(&errOut, trErr); close(copied) }()
		fmt.Fprintln(in, "go")
		done := make(chan error, 1)
		go func() { done <- tr.Wait() }()
		select {
		case err := <-done:
			<-copied
			if err != nil {
				t.Fatalf("trace: %v\n%s", err, errOut.String())
			}
		case <-time.After(30 * time.Second * time.Duration(tracetest.TimeSlack)):
			t.Fatalf("trace -p did not end within 30 s of the program's exec")
		}
		check(t, out.String(), errOut.String())
		if !strings.Contains(errOut.String(), "ran another executable: its trace ends") {
			t.Errorf("trace does not say that the process ran another executable:\n%s", errOut.String())
		}
		var exit *exec.ExitError
		if err := prog.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 7 {
			t.Errorf("the program, after its exec: %v, want exit status 7", err)
		}
	})
	t.Run("command", func(t *testing.T) {
		out, errOut, err := usdtTrace(t, "-transport", "ring", "-stats", "--", bin, "exec")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 7 {
			t.Errorf("trace: %v, want the command's exit status 7:\n%s", err, errOut)
		}
		check(t, out, errOut)
	})
}
