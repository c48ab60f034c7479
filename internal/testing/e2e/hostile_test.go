package e2e

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// hostileSrc's functions have names of the lengths of the sequences
// TestHostileNames writes over them in the notes: hostileName012 gets
// an OSC that sets the terminal's title and a CSI that clears its
// screen, and provided's provider a BEL, an invalid byte, a C1 CSI
// (U+009B, valid UTF-8) and a DEL. plain keeps its names.
const hostileSrc = `package main

import (
	"fmt"
	"os"
)

func hostileName012(s string) int { return len(s) }

func provided(n int) int { return n * 2 }

func plain(n int) int { return n + 1 }

func main() {
	fmt.Fprintln(os.Stderr, hostileName012("x"), provided(2), plain(3))
}
`

// The bytes written over the notes' names, and how every output must
// show them: as Go's %q escapes each, without quotes.
const (
	hostileName      = "\x1b]0;pwned\a\x1b[2J"
	hostileShown     = `\x1b]0;pwned\a\x1b[2J`
	hostileProvider  = "h\a\xff\u009bx\x7f"
	hostileProvShown = `h\a\xff\u009bx\x7f`
)

// TestHostileNames writes terminal escape sequences, an invalid byte and
// C0 and C1 controls over the provider and probe names in the notes of a
// copy of a built binary, as a binary nobody vouches for may have them
// (readelf shows they are there), and checks that none of it reaches the
// operator raw: list, bt, its script under bpftrace, and trace's events,
// -latency, -json and -stats, through each transport, print no control
// character (but newlines and tabs) and only valid UTF-8, and show the
// names escaped, and so do the strings of -otlp's spans. bt leaves out the probes whose names are not
// identifiers, saying so, and its script of the rest loads.
func TestHostileNames(t *testing.T) {
	requireAMD64(t)
	bin := filepath.Join(t.TempDir(), "hostile")
	copyFile(t, buildMain(t, "hostile", hostileSrc), bin)
	patchNotes(t, bin, map[string]string{
		"__hostileName012\x00":                 "__" + hostileName + "\x00",
		"hostile\x00entry__main__provided\x00": hostileProvider + "\x00entry__main__provided\x00",
		"hostile\x00exit__main__provided\x00":  hostileProvider + "\x00exit__main__provided\x00",
	})
	out, err := exec.Command("readelf", "-n", bin).Output()
	if err != nil {
		t.Fatalf("readelf -n: %v", err)
	}
	if !bytes.Contains(out, []byte(hostileName)) || !bytes.Contains(out, []byte(hostileProvider)) {
		t.Fatalf("readelf does not read the names written into the notes:\n%q", out)
	}
	toolexec := filepath.Join(toolsDir, "usdt-toolexec")

	t.Run("list", func(t *testing.T) {
		out, err := exec.Command(toolexec, "list", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("usdt-toolexec list: %v\n%q", err, out)
		}
		checkShown(t, "list", string(out), "entry__main__"+hostileShown, "exit__main__"+hostileShown, hostileProvShown+" ")
	})

	t.Run("bt", func(t *testing.T) {
		cmd := exec.Command(toolexec, "bt", bin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		script, err := cmd.Output()
		if err != nil {
			t.Fatalf("usdt-toolexec bt: %v\n%q", err, stderr.String())
		}
		checkShown(t, "bt's script", string(script), "usdt:"+bin+":hostile:exit__main__plain")
		if s := string(script); strings.Contains(s, "hostileName") || strings.Contains(s, "pwned") || strings.Contains(s, "provided") {
			t.Errorf("bt's script has a probe whose name is not an identifier:\n%s", s)
		}
		checkShown(t, "bt's stderr", stderr.String(), "leaves out 2 exit probes", "hostile:exit__main__"+hostileShown, hostileProvShown+":exit__main__provided")
		file := filepath.Join(t.TempDir(), "hostile.bt")
		writeFile(t, file, string(script))
		bt := tracetest.Host
		bt.RequireAttach(t)
		out, err := bt.Output(3*time.Minute, "", file, "-c", bin)
		if err != nil {
			t.Fatalf("bpftrace %s: %v\n%s", file, err, script)
		}
		checkShown(t, "bpftrace's output", out, "@us[main.plain")
	})

	eachTransport(t, func(t *testing.T, transport string) {
		out, errOut, err := usdtTrace(t, "-transport", transport, "-latency", "--", bin)
		if err != nil {
			t.Fatalf("trace: %v\n%q", err, errOut)
		}
		checkShown(t, "trace", out+errOut, "g=", "main."+hostileShown+`(s="x")`, "main."+hostileShown+" = (r1=1)", "main.provided(n=2)", "\nmain."+hostileShown+": 1 calls\n")

		out, errOut, err = usdtTrace(t, "-transport", transport, "-json", "--", bin)
		if err != nil {
			t.Fatalf("trace -json: %v\n%q", err, errOut)
		}
		checkShown(t, "trace -json", out+errOut)
		seen := map[string]bool{}
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var ev struct{ Provider, Probe, Function string }
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("-json output does not parse: %v\n%s", err, out)
			}
			seen[ev.Provider+" "+ev.Probe+" "+ev.Function] = true
		}
		for _, want := range []string{
			"hostile entry__main__" + hostileShown + " main." + hostileShown,
			"hostile exit__main__" + hostileShown + " main." + hostileShown,
			hostileProvShown + " entry__main__provided main.provided",
		} {
			if !seen[want] {
				t.Errorf("no -json event has provider, probe and function %q; they have %v", want, seen)
			}
		}

		spans := collectSpans(t)
		if _, errOut, err = usdtTrace(t, "-transport", transport, "-otlp", spans.url, "--", bin); err != nil {
			t.Fatalf("trace -otlp: %v\n%q", err, errOut)
		}
		checkShown(t, "the spans' strings", spans.strings(), "\nmain."+hostileShown+"\n", "\nmain.provided\n", "\nargs.s\n")

		out, errOut, err = usdtTrace(t, "-transport", transport, "-stats", "--", bin)
		if err != nil {
			t.Fatalf("trace -stats: %v\n%q", err, errOut)
		}
		checkShown(t, "trace -stats", out+errOut, "main."+hostileShown+": 1 calls")
	})
}

// TestDamagedNotes makes the first note of a built binary's notes claim a
// descriptor past the end of its section: list, bt and trace each fail
// with an error that says where and what to look at, not a panic.
func TestDamagedNotes(t *testing.T) {
	requireAMD64(t)
	bin := filepath.Join(t.TempDir(), "damaged")
	copyFile(t, buildMain(t, "hostile", hostileSrc), bin)
	b, notes := readNotes(t, bin)
	// A note's header: namesz, descsz, type.
	binary.LittleEndian.PutUint32(notes[4:], 0xffff)
	writeFile(t, bin, string(b))
	toolexec := filepath.Join(toolsDir, "usdt-toolexec")
	for _, args := range [][]string{{"list", bin}, {"bt", bin}, {"trace", "--", bin}} {
		out, err := exec.Command(toolexec, args...).CombinedOutput()
		if code := exitCode(err); code != 1 {
			t.Errorf("usdt-toolexec %s exits %d, want 1:\n%s", args[0], code, out)
		}
		checkShown(t, "usdt-toolexec "+args[0], string(out), bin+": sdtnote: section .note.stapsdt at offset", "note at 0x0 runs past the section", "readelf -n")
		if strings.Contains(string(out), "panic") {
			t.Errorf("usdt-toolexec %s panics:\n%s", args[0], out)
		}
	}
}

// exitCode is a command's exit status, by the error Run or Output gave.
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
}

// spanCollector is an OTLP/HTTP collector in the test's process: it
// decodes each request as a collector does and keeps every string of its
// spans, their names, attributes' keys and values and events' names.
type spanCollector struct {
	url string
	mu  sync.Mutex
	got []string
}

func collectSpans(t *testing.T) *spanCollector {
	c := &spanCollector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					c.got = append(c.got, sp.Name)
					for _, a := range sp.Attributes {
						c.got = append(c.got, a.Key, a.Value.GetStringValue())
					}
					for _, ev := range sp.Events {
						c.got = append(c.got, ev.Name)
					}
				}
			}
		}
		c.mu.Unlock()
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// strings are the spans' strings, each on a line of its own.
func (c *spanCollector) strings() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "\n" + strings.Join(c.got, "\n") + "\n"
}

// patchNotes replaces, in the .note.stapsdt section of the file bin,
// each of the keys of repl (each once or more) by its value, of the
// same length.
func patchNotes(t *testing.T, bin string, repl map[string]string) {
	t.Helper()
	b, notes := readNotes(t, bin)
	for old, new := range repl {
		if len(old) != len(new) || !bytes.Contains(notes, []byte(old)) {
			t.Fatalf("cannot write %q over %q in the notes", new, old)
		}
		copy(notes, bytes.ReplaceAll(notes, []byte(old), []byte(new)))
	}
	writeFile(t, bin, string(b))
}

// readNotes returns the bytes of the file bin, and its .note.stapsdt
// section's among them.
func readNotes(t *testing.T, bin string) (file, notes []byte) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	sec := f.Section(".note.stapsdt")
	f.Close()
	if sec == nil {
		t.Fatalf("%s has no .note.stapsdt", bin)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b, b[sec.Offset : sec.Offset+sec.Size]
}

// checkShown checks that out, what the operator reads of a command, is
// valid UTF-8 without a control character but newlines and tabs (C0,
// DEL, C1), and that it holds each of wants.
func checkShown(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for i, r := range out {
		if r == utf8.RuneError || r < ' ' && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 {
			t.Errorf("%s has %s at byte %d: %q", what, fmt.Sprintf("%q", r), i, out[max(0, i-40):min(len(out), i+40)])
			break
		}
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s does not show %q:\n%s", what, w, out)
		}
	}
}
