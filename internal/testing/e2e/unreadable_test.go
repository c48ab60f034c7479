package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// unmappedResult is what the unmapped fixture writes, traced or not:
// five rounds of size (100 + 21 bytes), boxed (7 + 40 + 1024) and one
// failure each.
const unmappedResult = "total=5960 fails=5\n"

// unmappedExit is the fixture's exit status.
const unmappedExit = 3

// TestTraceUnmapped: a correct program that holds a slice, a string, a
// pointer, a struct's string and slice, and an error into memory it has
// unmapped, and passes them to functions that read none of their bytes,
// runs as it does untraced through the ring, through BPF and under
// bpftrace attached to every probe: same result, same exit status, no
// fault. trace shows each value it could not read as unreadable, at its
// address, in text and in JSON: never as zeros. A rule's attribute that
// reads the bytes shows the panic it recovered.
func TestTraceUnmapped(t *testing.T) {
	bin := buildFixtureRules(t, "unmapped")
	// run runs the fixture through cmd (its last argument is the file
	// the fixture writes) and checks the file.
	result := func(t *testing.T, file string) {
		t.Helper()
		got, err := os.ReadFile(file)
		if err != nil || string(got) != unmappedResult {
			t.Errorf("the fixture wrote %q (%v), want %q as untraced", got, err, unmappedResult)
		}
	}
	exitStatus := func(t *testing.T, err error, stderr string) {
		t.Helper()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != unmappedExit {
			t.Errorf("exit: %v, want status %d as untraced\n%s", err, unmappedExit, stderr)
		}
		for _, bad := range []string{"fault", "SIGSEGV", "SIGBUS", "panic"} {
			if strings.Contains(stderr, bad) {
				t.Errorf("stderr says %q:\n%s", bad, stderr)
			}
		}
	}

	file := filepath.Join(t.TempDir(), "untraced")
	out, err := exec.Command(bin, file).CombinedOutput()
	exitStatus(t, err, string(out))
	result(t, file)

	eachTransport(t, func(t *testing.T, transport string) {
		file := filepath.Join(t.TempDir(), "out")
		stdout, stderr, err := usdtTrace(t, "-transport", transport, "--", bin, file)
		exitStatus(t, err, stderr)
		result(t, file)
		checkUnreadable(t, stdout)
		// An attribute that reads the bytes is a recovered panic.
		if n := strings.Count(stdout, "box.first=<panic: runtime error: invalid memory address or nil pointer dereference>"); n != 5 {
			t.Errorf("%d of boxed's attributes say they panicked, want 5:\n%s", n, stdout)
		}
		if guestDir != "" {
			return // the same reads, formatted by trace
		}

		file = filepath.Join(t.TempDir(), "json")
		stdout, stderr, err = usdtTrace(t, "-json", "-transport", transport, "main.size", "main.boxed", "--", bin, file)
		exitStatus(t, err, stderr)
		result(t, file)
		var entries int
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var ev struct {
				Probe string
				Args  map[string]json.RawMessage
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("not JSON (%v): %s", err, l)
			}
			if !strings.HasPrefix(ev.Probe, "entry__") {
				continue
			}
			entries++
			for name, v := range ev.Args {
				if name == "box.first" {
					if !strings.Contains(string(v), "panic: runtime error: invalid memory address") {
						t.Errorf("box.first = %s, want the attribute's panic", v)
					}
					continue
				}
				if name == "x" {
					var x struct{ Name, Data json.RawMessage }
					if err := json.Unmarshal(v, &x); err != nil {
						t.Fatalf("x: %v: %s", err, v)
					}
					checkUnreadableJSON(t, "x.name", x.Name)
					checkUnreadableJSON(t, "x.data", x.Data)
					continue
				}
				checkUnreadableJSON(t, name, v)
			}
		}
		if entries != 10 {
			t.Errorf("%d entries of size and boxed in -json, want 10:\n%s", entries, stdout)
		}
	})

	eachBpftrace(t, func(t *testing.T, bt tracetest.Bpftrace) {
		file := filepath.Join(t.TempDir(), "out")
		out := bpftrace(t, bt, fmt.Sprintf(`usdt:%s:*:* { @[probe] = count(); } usdt:%[1]s:unmapped:entry__main__size { printf("s=%%s\n", str(arg2)); }`, bin), bin+" "+file)
		result(t, file)
		for _, probe := range []string{"entry__main__size", "exit__main__size", "entry__main__boxed", "exit__main__boxed", "entry__main__failed", "exit__main__failed"} {
			if !regexp.MustCompile(`@\[usdt:[^\]]*:` + probe + `\]: 5\n`).MatchString(out) {
				t.Errorf("bpftrace did not count 5 fires of %s:\n%s", probe, out)
			}
		}
		// The probe's copy of the string says it could not read it.
		if n := len(regexp.MustCompile(`(?m)^s=<unreadable 0x[0-9a-f]+>$`).FindAllString(out, -1)); n != 5 {
			t.Errorf("bpftrace's str(arg2) said unreadable %d times, want 5:\n%s", n, out)
		}
	})
}

// unreadableAt matches a value trace could not read, with its address.
var unreadableAt = regexp.MustCompile(`<unreadable 0x([0-9a-f]+)>`)

// checkUnreadable checks the unmapped fixture's events in trace's text:
// every value in the unmapped page shows as unreadable, at its offset in
// the page from the slice's start, where the fixture put it.
func checkUnreadable(t *testing.T, out string) {
	t.Helper()
	want := map[string][]uint64{
		"main.size(":   {0, 0, 256}, // b, s, r
		"main.boxed(":  {512, 1024}, // x.name, x.data
		"main.failed(": {3072},      // err's data
	}
	seen := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		for fn, offs := range want {
			if !strings.Contains(l, " "+fn) {
				continue
			}
			seen[fn]++
			m := unreadableAt.FindAllStringSubmatch(l, -1)
			if len(m) != len(offs) {
				t.Errorf("%d unreadable values in %q, want %d", len(m), l, len(offs))
				continue
			}
			var base uint64
			for i, sub := range m {
				addr, _ := strconv.ParseUint(sub[1], 16, 64)
				if i == 0 {
					base = addr - offs[0]
				}
				if addr-base != offs[i] {
					t.Errorf("value %d of %q is at %#x, %#x past the page, want %#x", i, l, addr, addr-base, offs[i])
				}
			}
		}
	}
	for fn := range want {
		if seen[fn] != 5 {
			t.Errorf("%d entries of %s, want 5:\n%s", seen[fn], fn, out)
		}
	}
}

// checkUnreadableJSON checks that v is JSON's unreadable value.
func checkUnreadableJSON(t *testing.T, name string, v json.RawMessage) {
	t.Helper()
	var u struct{ Unreadable string }
	if err := json.Unmarshal(v, &u); err != nil || !regexp.MustCompile(`^0x[0-9a-f]+$`).MatchString(u.Unreadable) {
		t.Errorf("%s = %s, want {\"unreadable\":\"0x...\"}", name, v)
	}
}

// TestTraceTorn: while one goroutine switches a struct's string and slice
// fields between a short value and a 1 MB one, another passes the struct,
// copied without synchronization, to a probed function: copies tear,
// a short value's pointer with a long one's length. Through the ring and
// through BPF the program runs to its end as untraced, and every value
// an event shows is one that was written, cut at the bound, or one that
// begins as the value its pointer belongs to, read no further than the
// bound, or unreadable.
func TestTraceTorn(t *testing.T) {
	bin := buildFixtureRules(t, "torn")
	const calls = 200000
	want := fmt.Sprintf("calls %d sum>=0 true", calls)
	if out, err := exec.Command(bin, strconv.Itoa(calls)).Output(); err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("untraced: %q, %v; want %q", out, err, want)
	}
	const long = "...(1048576 bytes)"
	// shown says whether a field's JSON is one the fixture may show, and
	// whether it is a torn one.
	shown := func(v json.RawMessage, short, longByte string) (ok, torn bool) {
		var s string
		if string(v) == "null" {
			return true, false // a nil slice, before the first switch
		}
		if err := json.Unmarshal(v, &s); err != nil {
			// Unreadable: past a torn length's page, or the zero
			// value's nil pointer with the first write's length.
			var u struct{ Unreadable string }
			return json.Unmarshal(v, &u) == nil && u.Unreadable != "", false
		}
		switch {
		case s == "", s == short, s == strings.Repeat(longByte, 64)+long:
			return true, false // as written (the zero value first), the long one cut
		case s == strings.Repeat(longByte, len(short)):
			return true, true // the long one's pointer, the short one's length
		case strings.HasPrefix(s, short) && strings.HasSuffix(s, long):
			return true, true // the short one's pointer, the long one's length
		}
		return false, false
	}
	eachTransport(t, func(t *testing.T, transport string) {
		events := filepath.Join(t.TempDir(), "events")
		f, err := os.Create(events)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var stderr strings.Builder
		cmd := exec.Command(filepath.Join(toolsDir, "usdt-toolexec"), "trace", "-json", "-transport", transport, "--", bin, strconv.Itoa(calls))
		cmd.Stdout, cmd.Stderr = f, &stderr
		if err := runWithin(cmd, 5*time.Minute); err != nil {
			t.Fatalf("trace: %v\n%s", err, stderr.String())
		}
		for _, bad := range []string{"fault", "SIGSEGV", "SIGBUS", "panic"} {
			if strings.Contains(stderr.String(), bad) {
				t.Fatalf("stderr says %q:\n%s", bad, stderr.String())
			}
		}
		data, err := os.ReadFile(events)
		if err != nil {
			t.Fatal(err)
		}
		// The command's output goes to trace's stderr.
		if n := strings.Count(stderr.String(), want+"\n"); n != 1 {
			t.Errorf("the fixture's result %q came %d times, want once:\n%s", want, n, stderr.String())
		}
		var entries, torn, bad int
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var ev struct {
				Probe string
				Args  struct {
					X struct{ Name, Data json.RawMessage }
				}
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("not an event (%v): %.300s", err, l)
			}
			if !strings.HasPrefix(ev.Probe, "entry__") {
				continue
			}
			entries++
			nameOK, nameTorn := shown(ev.Args.X.Name, "short", "L")
			dataOK, dataTorn := shown(ev.Args.X.Data, "tiny", "B")
			if !nameOK || !dataOK {
				if bad++; bad <= 10 {
					t.Errorf("a value that was never written: %.400s", l)
				}
			}
			if nameTorn || dataTorn {
				torn++
			}
		}
		if entries == 0 {
			t.Fatalf("no events:\n%s", stderr.String())
		}
		if bad > 0 {
			t.Errorf("%d of %d entries show a value that was never written", bad, entries)
		}
		t.Logf("%d entries, %d of them torn", entries, torn)
	})
}

// runWithin runs cmd, and kills it and fails if it takes longer than d.
func runWithin(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d * time.Duration(tracetest.TimeSlack)):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not end within %v", strings.Join(cmd.Args, " "), d)
	}
}
