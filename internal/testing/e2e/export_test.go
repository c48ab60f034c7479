package e2e

// Tests of trace -otlp and -pprof with their real consumers: a Jaeger
// all-in-one (built by scripts/jaeger.sh) that receives the spans and
// answers for them on its HTTP API, and go tool pprof reading the profile.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// The shop (testdata/shop) serves 9 requests; 3 ask for salt and fail.
const shopRequests = 9

// shopEvent is an event of trace -json.
type shopEvent struct {
	Provider, Probe string
	Function        string
	Goroutine       uint64
	Args            map[string]any
	Results         map[string]any
	Elapsed         int64 `json:"elapsed_ns"`
}

// traceShop builds the shop, traces it with args besides -json, and
// returns its events.
func traceShop(t *testing.T, args ...string) (bin string, events []shopEvent) {
	t.Helper()
	dir := fixture(t, "shop")
	bin = filepath.Join(t.TempDir(), "shop")
	goCmd(t, dir, buildEnv(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	out, errOut, err := usdtTrace(t, append(append([]string{"-json"}, args...), "--", bin)...)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	if strings.Contains(errOut, "usdt-toolexec trace:") {
		t.Errorf("trace reported a problem:\n%s", errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e shopEvent
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("-json output does not parse: %v\n%s", err, out)
		}
		events = append(events, e)
	}
	return bin, events
}

// jaeger is a running Jaeger all-in-one.
type jaeger struct {
	otlp, api string // base URLs
}

// jaegerBinary is the Jaeger scripts/jaeger.sh builds; the test skips
// without it, and fails in CI (tracetest.SkipMissing).
func jaegerBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("USDT_JAEGER_DIR")
	if dir == "" {
		dir = "/var/cache/go-usdt/jaeger"
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		tracetest.SkipMissing(t, "Jaeger is not built in %s (scripts/jaeger.sh, make jaeger, builds it, once, in about 20 minutes): %v", dir, err)
	}
	return filepath.Join(dir, "jaeger")
}

// freePorts returns n TCP ports of the loopback nobody listens on now.
func freePorts(t *testing.T, n int) []int {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// startJaeger starts Jaeger on loopback ports with in-memory storage, an
// OTLP/HTTP receiver and the query API, waits until it answers, and stops
// it when the test ends.
func startJaeger(t *testing.T) jaeger {
	t.Helper()
	j, _ := startJaegerOn(t, freePorts(t, 3))
	return j
}

// startJaegerOn is startJaeger on the ports p (the query API's HTTP and
// gRPC, OTLP/HTTP's): a test that kills it starts it again there. It
// returns the server too.
func startJaegerOn(t *testing.T, p []int) (jaeger, *server) {
	t.Helper()
	bin := jaegerBinary(t)
	tmpl, err := os.ReadFile("testdata/jaeger.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(string(tmpl), p[0], p[1], p[2])
	file := filepath.Join(t.TempDir(), "jaeger.yaml")
	writeFile(t, file, config)
	proc := startServer(t, exec.Command(bin, "--config", file))
	j := jaeger{otlp: fmt.Sprintf("http://127.0.0.1:%d", p[2]), api: fmt.Sprintf("http://127.0.0.1:%d", p[0])}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if exited, err := proc.exited(); exited {
			t.Fatalf("Jaeger exited: %v\n%s", err, proc.output())
		}
		resp, err := http.Get(j.api + "/api/services")
		if err == nil {
			resp.Body.Close()
			c, derr := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p[2]))
			if resp.StatusCode == http.StatusOK && derr == nil {
				c.Close()
				return j, proc
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger did not answer in 60 s: %v\n%s", err, proc.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// server is a command a test started, its output in a file.
type server struct {
	cmd  *exec.Cmd
	out  string        // the output's file
	done chan struct{} // closed when it has exited
	err  error         // Wait's, once done is closed
}

// startServer starts cmd, its stdout and stderr into a file (not a
// pipe: Wait would wait for every process that holds it, the children
// of a traced command too), and kills it when the test ends.
func startServer(t *testing.T, cmd *exec.Cmd) *server {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(cmd.Path)+".out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &server{cmd: cmd, out: f.Name(), done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exited reports whether the command has exited, and Wait's error.
func (p *server) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// output is what the command wrote so far.
func (p *server) output() string {
	b, _ := os.ReadFile(p.out)
	return string(b)
}

// jaegerSpan is a span as Jaeger's HTTP API returns it (times in µs).
type jaegerSpan struct {
	TraceID, SpanID, OperationName string
	References                     []struct{ RefType, TraceID, SpanID string }
	StartTime, Duration            int64
	Tags                           []jaegerTag
	// Logs are the span's events.
	Logs []struct {
		Timestamp int64
		Fields    []jaegerTag
	}
}

type jaegerTag struct {
	Key   string
	Value any
}

// event returns the fields of the span's events of this name.
func (s jaegerSpan) events(name string) []map[string]any {
	var evs []map[string]any
	for _, l := range s.Logs {
		fields := map[string]any{}
		for _, f := range l.Fields {
			fields[f.Key] = f.Value
		}
		if fields["event"] == name {
			evs = append(evs, fields)
		}
	}
	return evs
}

func (s jaegerSpan) tag(key string) (any, bool) {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return tg.Value, true
		}
	}
	return nil, false
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// processes returns the processes of the service's traces in Jaeger
// (their resources), each as its tags by key.
func (j jaeger) processes(t *testing.T, service string) []map[string]any {
	resp, err := http.Get(j.api + "/api/traces?service=" + service + "&limit=10000&lookback=1h")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Processes map[string]struct {
				ServiceName string
				Tags        []jaegerTag
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("Jaeger's /api/traces: %v", err)
	}
	var procs []map[string]any
	for _, tr := range body.Data {
		for _, p := range tr.Processes {
			tags := map[string]any{"service.name": p.ServiceName}
			for _, tg := range p.Tags {
				tags[tg.Key] = tg.Value
			}
			procs = append(procs, tags)
		}
	}
	return procs
}

// traces returns the service's traces once Jaeger has want of them, or
// what it has after 30 s.
func (j jaeger) traces(t *testing.T, service string, want int) map[string][]jaegerSpan {
	var got map[string][]jaegerSpan
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		resp, err := http.Get(j.api + "/api/traces?service=" + service + "&limit=10000&lookback=1h")
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Data []struct {
				TraceID string
				Spans   []jaegerSpan
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("Jaeger's /api/traces: %v", err)
		}
		got = map[string][]jaegerSpan{}
		for _, tr := range body.Data {
			got[tr.TraceID] = tr.Spans
		}
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
	}
}

// TestTraceOTLP sends the shop's calls to Jaeger and reads them back: one
// trace per request, the three calls children of the request's within its
// time, their arguments as attributes, the failed ones with the error
// status.
func TestTraceOTLP(t *testing.T) {
	requireAMD64(t)
	eachTransport(t, testOTLP)
}

func testOTLP(t *testing.T, transport string) {
	j := startJaeger(t)
	// The shop, which trace starts, has trace's environment: its own
	// OTEL_SERVICE_NAME names its spans' service, over -service, as the
	// SDK in the shop would (trace reads it in /proc/PID/environ).
	t.Setenv("OTEL_SERVICE_NAME", "svc-from-env")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	_, events := traceShop(t, "-transport", transport, "-otlp", j.otlp, "-service", "shop-e2e")
	exits := map[string]int{}
	for _, e := range events {
		if e.Results != nil {
			exits[e.Function]++
		}
	}
	if exits["main.handle"] != shopRequests {
		t.Fatalf("trace -json shows %d returns of main.handle, want %d: %v", exits["main.handle"], shopRequests, exits)
	}
	// One trace per request, and one of the store's opened probe, which
	// fires outside any traced call.
	traces := j.traces(t, "svc-from-env", shopRequests+1)
	if len(traces) != shopRequests+1 {
		services := ""
		if resp, err := http.Get(j.api + "/api/services"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			services = string(b)
		}
		t.Fatalf("Jaeger has %d traces of svc-from-env, want one per request and one of store:opened, %d; its services: %s", len(traces), shopRequests+1, services)
	}
	// The resource: the shop's process, its environment's attributes.
	procs := j.processes(t, "svc-from-env")
	if len(procs) == 0 {
		t.Errorf("Jaeger's traces of svc-from-env name no process")
	}
	for _, p := range procs {
		if pid, _ := p["process.pid"].(float64); pid <= 0 || p["process.executable.name"] != "shop" || p["deployment.environment.name"] != "test" || p["host.name"] == nil {
			t.Errorf("Jaeger's process of svc-from-env: tags %v, want process.pid, process.executable.name shop, deployment.environment.name test and host.name", p)
		}
	}
	spans := map[string]int{}
	failed, opened := 0, 0
	for id, tr := range traces {
		if len(tr) == 1 && tr[0].OperationName == "store:opened" {
			opened++
			if w, _ := tr[0].tag("workers"); w != 3.0 || tr[0].Duration != 0 || tr[0].parent() != "" {
				t.Errorf("store:opened's span: workers %v, duration %d µs, parent %q; want 3, 0, none", w, tr[0].Duration, tr[0].parent())
			}
			continue
		}
		var root *jaegerSpan
		for i, s := range tr {
			spans[s.OperationName]++
			if s.parent() == "" {
				if root != nil {
					t.Errorf("trace %s has two roots: %s and %s", id, root.OperationName, s.OperationName)
				}
				root = &tr[i]
			}
		}
		if root == nil || root.OperationName != "main.handle" {
			t.Errorf("trace %s: root %+v, want main.handle", id, root)
			continue
		}
		item, _ := root.tag("args.item")
		req, _ := root.tag("args.req")
		gid, _ := root.tag("goroutine")
		salt := item == "salt"
		if salt {
			failed++
		}
		checkStatus(t, *root, salt)
		want := map[string]bool{"main.(*Store).Get": true, "main.audit": true, "main.price": !salt}
		for _, s := range tr {
			if s.SpanID == root.SpanID {
				continue
			}
			if !want[s.OperationName] {
				t.Errorf("request %v (%v): unexpected span %s", req, item, s.OperationName)
			}
			delete(want, s.OperationName)
			if p := s.parent(); p != root.SpanID {
				t.Errorf("request %v: %s's parent is %s, want main.handle's %s", req, s.OperationName, p, root.SpanID)
			}
			// Jaeger keeps microseconds, cut from nanoseconds: a bound may
			// move by one.
			if s.StartTime < root.StartTime-1 || s.StartTime+s.Duration > root.StartTime+root.Duration+1 {
				t.Errorf("request %v: %s [%d, +%d] is not within main.handle [%d, +%d]", req, s.OperationName, s.StartTime, s.Duration, root.StartTime, root.Duration)
			}
			if g, _ := s.tag("goroutine"); g != gid {
				t.Errorf("request %v: %s on goroutine %v, main.handle on %v", req, s.OperationName, g, gid)
			}
			switch s.OperationName {
			case "main.(*Store).Get":
				if v, _ := s.tag("args.item"); v != item {
					t.Errorf("request %v: Get's args.item %v, want %v", req, v, item)
				}
				if fn, _ := s.tag("code.function.name"); fn != "main.(*Store).Get" {
					t.Errorf("Get's code.function.name %v", fn)
				}
				file, _ := s.tag("code.file.path")
				line, _ := s.tag("code.line.number")
				if f, _ := file.(string); !strings.HasSuffix(f, "/main.go") || line == nil || line.(float64) <= 0 {
					t.Errorf("Get's code.file.path %v, code.line.number %v: want the shop's main.go and a line", file, line)
				}
				if _, ok := s.tag("code.namespace"); ok {
					t.Errorf("Get has the deprecated code.namespace")
				}
				checkStatus(t, s, salt)
				// The store's probe fired inside Get: an event of its span.
				evs := s.events("store:stock__checked")
				qty := map[any]float64{"tea": 3, "rice": 5, "salt": 0}[item]
				if len(evs) != 1 || evs[0]["item"] != item || evs[0]["qty"] != qty {
					t.Errorf("request %v: Get's store:stock__checked events %v, want one with item %v, qty %v", req, evs, item, qty)
				}
			case "main.audit":
				if v, _ := s.tag("args.req"); v != req {
					t.Errorf("request %v: audit's args.req %v", req, v)
				}
				if v, _ := s.tag("args.ok"); v != !salt {
					t.Errorf("request %v (%v): audit's args.ok %v", req, item, v)
				}
				checkStatus(t, s, false)
			case "main.price":
				checkStatus(t, s, false)
			}
		}
		for name, w := range want {
			if w {
				t.Errorf("request %v (%v): no %s span", req, item, name)
			}
		}
	}
	for fn, n := range exits {
		if spans[fn] != n {
			t.Errorf("Jaeger has %d spans of %s, trace -json %d returns", spans[fn], fn, n)
		}
	}
	if failed != 3 {
		t.Errorf("%d requests for salt, want 3", failed)
	}
	if opened != 1 {
		t.Errorf("%d traces of store:opened alone, want 1", opened)
	}
}

// checkStatus checks that a span has the error status when it returned a
// non-nil error, and only then.
func checkStatus(t *testing.T, s jaegerSpan, failed bool) {
	t.Helper()
	errTag, _ := s.tag("error")
	code, _ := s.tag("otel.status_code")
	msg, _ := s.tag("otel.status_description")
	if failed && (errTag != true || code != "ERROR" || msg != "no salt") {
		t.Errorf("%s returned an error: tags error=%v otel.status_code=%v otel.status_description=%v, want true, ERROR, the error's message", s.OperationName, errTag, code, msg)
	}
	if !failed && (errTag != nil || code != nil) {
		t.Errorf("%s returned no error: tags error=%v otel.status_code=%v, want none", s.OperationName, errTag, code)
	}
}

// pprofTotal is the total go tool pprof -top prints, in its unit.
var pprofTotal = regexp.MustCompile(`of (\d+)(ns)? total`)

// TestTracePprof has go tool pprof read the profile of the shop's calls:
// its totals are the calls of trace -json's same run, and the sums of
// their elapsed times, and its locations are the functions' addresses.
func TestTracePprof(t *testing.T) {
	requireAMD64(t)
	eachTransport(t, testPprof)
}

func testPprof(t *testing.T, transport string) {
	file := filepath.Join(t.TempDir(), "shop.pb.gz")
	bin, events := traceShop(t, "-transport", transport, "-pprof", file)
	var calls, inclusive, roots int64
	for _, e := range events {
		if e.Results == nil {
			continue
		}
		calls++
		inclusive += e.Elapsed
		if e.Function == "main.handle" {
			roots += e.Elapsed
		}
	}
	if calls != shopRequests*4-3 {
		t.Fatalf("trace -json shows %d returns, want %d", calls, shopRequests*4-3)
	}
	for _, tt := range []struct {
		index string
		want  int64
	}{
		{"calls", calls},
		{"inclusive", inclusive},
		// Each call's own time: they add up to the requests' time.
		{"wall", roots},
	} {
		out, err := exec.Command("go", "tool", "pprof", "-top", "-unit=ns", "-sample_index="+tt.index, file).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof -top: %v\n%s", err, out)
		}
		m := pprofTotal.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("go tool pprof -top -sample_index=%s printed no total:\n%s", tt.index, out)
		}
		if got, _ := strconv.ParseInt(m[1], 10, 64); got != tt.want {
			t.Errorf("go tool pprof -sample_index=%s total %d, trace -json's sum %d\n%s", tt.index, got, tt.want, out)
		}
	}

	// go tool nm's addresses of the functions are the locations'.
	nm, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, nm)
	}
	raw, err := exec.Command("go", "tool", "pprof", "-raw", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -raw: %v\n%s", err, raw)
	}
	for _, fn := range []string{"main.handle", "main.(*Store).Get", "main.audit", "main.price"} {
		sym := regexp.MustCompile(`(?m)^\s*([0-9a-f]+) T ` + regexp.QuoteMeta(fn) + `$`).FindStringSubmatch(string(nm))
		if sym == nil {
			t.Fatalf("go tool nm lists no %s", fn)
		}
		loc := regexp.MustCompile(`(?m)^\s*\d+: 0x([0-9a-f]+) M=1 ` + regexp.QuoteMeta(fn) + ` .*/main\.go:\d+`).FindStringSubmatch(string(raw))
		if loc == nil || loc[1] != sym[1] {
			t.Errorf("%s: go tool nm says %s, the profile's location %v\n%s", fn, sym[1], loc, raw)
		}
	}
}

// trace returns the spans of the trace with this id, none when Jaeger has
// no such trace.
func (j jaeger) trace(t *testing.T, id string) []jaegerSpan {
	resp, err := http.Get(j.api + "/api/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	var body struct {
		Data []struct{ Spans []jaegerSpan }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("Jaeger's /api/traces/%s: %v", id, err)
	}
	if len(body.Data) == 0 {
		return nil
	}
	return body.Data[0].Spans
}

// TestTraceContext traces an HTTP server whose requests carry W3C trace
// context (testdata/joined) with -otlp into Jaeger: each request's spans
// join the header's trace under the header's span, with the attributes
// its rules name, the failed call's span has the error status, no child
// lies outside its parent, and the requests whose caller did not sample
// them make no span. The attribute that dereferences a nil pointer shows
// the panic, and the program prints what its plain build prints.
func TestTraceContext(t *testing.T) {
	requireAMD64(t)
	eachTransport(t, testContext)
}

func testContext(t *testing.T, transport string) {
	j := startJaeger(t)
	dir := fixture(t, "joined")
	bin := filepath.Join(t.TempDir(), "joined")
	goCmd(t, dir, buildEnv(), "build", "-o", bin, usdtToolexec("-rules", filepath.Join(dir, "rules.yml")), ".")
	plainBin := filepath.Join(t.TempDir(), "plain")
	goCmd(t, dir, buildEnv(), "build", "-o", plainBin, ".")
	plain, err := exec.Command(plainBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, err := usdtTrace(t, "-transport", transport, "-otlp", j.otlp, "-service", "joined-e2e", "--", bin)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, errOut)
	}
	// trace gives the command its stderr for its output.
	if !strings.Contains(errOut, string(plain)) {
		t.Errorf("traced, the program printed\n%s\nplain\n%s", errOut, plain)
	}
	const requests, unsampled = 200, 20
	// serve, check and price, none of them on hold.
	if want := fmt.Sprintf("%d calls joined traces their callers did not sample", 3*unsampled); !strings.Contains(errOut, want) {
		t.Errorf("trace's stderr does not say %q:\n%s", want, errOut)
	}
	j.traces(t, "joined-e2e", requests-unsampled)
	for i := range requests {
		// The header the program sends, as testdata/joined/main.go's
		// TraceParent writes it.
		traceID := fmt.Sprintf("4bf92f3577b34da6a3ce929d%06x00", i)
		gateway := fmt.Sprintf("00f067aa0b%06x", i)
		spans := j.trace(t, traceID)
		if i%10 == 5 {
			if len(spans) != 0 {
				t.Errorf("request %d was not sampled by its caller, and Jaeger has %d spans of its trace", i, len(spans))
			}
			continue
		}
		byName := map[string]jaegerSpan{}
		for _, s := range spans {
			byName[s.OperationName] = s
		}
		onHold := i%10 == 9
		want := 3
		if onHold {
			want = 2 // no price
		}
		serve, ok := byName["main.serve"]
		if len(spans) != want || !ok {
			t.Errorf("request %d: trace %s has spans %v, want main.serve, main.check and main.price but on hold", i, traceID, slices.Collect(maps.Keys(byName)))
			continue
		}
		if p := serve.parent(); p != gateway {
			t.Errorf("request %d: main.serve's parent is %q, want the traceparent's span %s", i, p, gateway)
		}
		for key, want := range map[string]any{"order.path": fmt.Sprint("/orders/", i), "client.tenant": fmt.Sprint("t", i%3)} {
			if v, _ := serve.tag(key); v != want {
				t.Errorf("request %d: main.serve's %s is %v, want %v", i, key, v, want)
			}
		}
		for _, s := range spans {
			if s.SpanID == serve.SpanID {
				continue
			}
			if p := s.parent(); p != serve.SpanID {
				t.Errorf("request %d: %s's parent is %s, want main.serve's %s", i, s.OperationName, p, serve.SpanID)
			}
			// Jaeger keeps microseconds, cut from nanoseconds.
			if s.StartTime < serve.StartTime-1 || s.StartTime+s.Duration > serve.StartTime+serve.Duration+1 {
				t.Errorf("request %d: %s [%d, +%d] is not within main.serve [%d, +%d]", i, s.OperationName, s.StartTime, s.Duration, serve.StartTime, serve.Duration)
			}
		}
		if code, _ := byName["main.check"].tag("otel.status_code"); (code == "ERROR") != onHold {
			t.Errorf("request %d: main.check's span has the status %v; it returned an error: %v", i, code, onHold)
		}
		if onHold {
			continue
		}
		customer := fmt.Sprint("c", i%7)
		if i%4 == 0 {
			customer = "<panic: runtime error: invalid memory address or nil pointer dereference>"
		}
		for key, want := range map[string]any{"order.customer": customer, "order.id": float64(i)} {
			if v, _ := byName["main.price"].tag(key); v != want {
				t.Errorf("request %d: main.price's %s is %v, want %v", i, key, v, want)
			}
		}
	}
}
