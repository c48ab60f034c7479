package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/trace"
)

// receiver is an OTLP/HTTP collector in the test's process: it decodes
// every request as a collector does and keeps the spans, each with its
// resource's service.name.
type receiver struct {
	url string
	// status is what it answers; hold, when not nil, keeps every request
	// waiting until it is closed.
	status int
	hold   chan struct{}

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	// resources are the spans' resources' attributes.
	resources []map[string]any
	// bad is what was wrong with a request, which fails the test.
	bad []string
}

// newReceiver starts a receiver. The exporter it receives from sees
// none of the machine's settings of the service's name, and no process
// in /proc: the events' process 4242 could be any.
func newReceiver(t *testing.T, status int, hold chan struct{}) *receiver {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	setProcfs(t, t.TempDir())
	r := &receiver{status: status, hold: hold}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, b := range r.bad {
			t.Error("receiver:", b)
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// newExporter starts an exporter of the service shop to the receiver.
func newExporter(t *testing.T, r *receiver) *Exporter {
	t.Helper()
	e, err := New(context.Background(), r.url, "", "shop", false)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	if r.hold != nil {
		<-r.hold
	}
	body, err := r.body(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.bad = append(r.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		r.bad = append(r.bad, "request does not decode: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.status != http.StatusOK {
		http.Error(w, "rejected by the test", r.status)
		return
	}
	for _, rs := range msg.ResourceSpans {
		res := attributes(rs.GetResource().GetAttributes())
		service, _ := res["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, s)
				r.services = append(r.services, service)
				r.resources = append(r.resources, res)
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// body is the request's protobuf, checked to be what a collector takes
// at its OTLP/HTTP endpoint.
func (r *receiver) body(req *http.Request) ([]byte, error) {
	switch {
	case req.Method != http.MethodPost:
		return nil, fmt.Errorf("request: method %s", req.Method)
	case req.URL.Path != "/v1/traces":
		return nil, fmt.Errorf("request: path %s, want /v1/traces", req.URL.Path)
	case req.Header.Get("Content-Type") != "application/x-protobuf":
		return nil, fmt.Errorf("request: Content-Type %q", req.Header.Get("Content-Type"))
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		body = z
	}
	return io.ReadAll(body)
}

// setProcfs has the exporters the test starts read processes under dir.
func setProcfs(t *testing.T, dir string) {
	old := procfs
	procfs = dir
	t.Cleanup(func() { procfs = old })
}

// resourcesOf are the resources' attributes of the spans received.
func (r *receiver) resourcesOf() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.resources)
}

func (r *receiver) received() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), slices.Clone(r.services)
}

// attributes are OTLP attributes as Go values: string, int64, bool or
// float64.
func attributes(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.DoubleValue
		default:
			m[kv.Key] = kv.Value.String()
		}
	}
	return m
}

// origin is when the test's events happen, give or take microseconds.
var origin = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func us(n int) time.Time { return origin.Add(time.Duration(n) * time.Microsecond) }

// thread is a goroutine of process 4242, alone on its thread.
type thread uint64

// enter is the entry event of fn, whose exit is traced too, at n µs.
func (g thread) enter(fn string, n int, args ...trace.Value) *trace.Event {
	return (&trace.Event{Time: us(n), PID: 4242, TID: int(g) + 100, Provider: "usdt_main", Probe: "entry", Function: fn, Package: "main", Paired: true, Goroutine: uint64(g)}).WithValues(args)
}

// leave is the exit event of fn at n µs, elapsed µs after its entry.
func (g thread) leave(fn string, n, elapsed int, results ...trace.Value) *trace.Event {
	return (&trace.Event{Time: us(n), PID: 4242, TID: int(g) + 100, Provider: "usdt_main", Probe: "exit", Function: fn, Package: "main", Exit: true, Goroutine: uint64(g), Elapsed: time.Duration(elapsed) * time.Microsecond}).WithValues(results)
}

// inPackage is ev of a function of the package at path.
func inPackage(path string, ev *trace.Event) *trace.Event {
	ev.Package = path
	return ev
}

// fire is an event of a usdtgen probe on the goroutine's thread at n µs.
func (g thread) fire(name string, n int, args ...trace.Value) *trace.Event {
	return (&trace.Event{Time: us(n), PID: 4242, TID: int(g) + 100, Provider: "shop", Probe: name}).WithValues(args)
}

// The values as the tracer hands them over: Data as -json writes it, Text
// as the event lines show it.
func str(name, s string) trace.Value {
	return trace.Value{Name: name, Type: "string", Kind: probe.String, Data: s, Text: `"` + s + `"`}
}

func i64(name string, n int64, text string) trace.Value {
	return trace.Value{Name: name, Type: "int", Kind: probe.Int64, Data: n, Text: text}
}

func u64(name string, n uint64, kind probe.Kind, text string) trace.Value {
	return trace.Value{Name: name, Type: kind.GoType(), Kind: kind, Data: n, Text: text}
}

func boolean(name string, b bool) trace.Value {
	return trace.Value{Name: name, Type: "bool", Kind: probe.Bool, Data: b, Text: map[bool]string{true: "true", false: "false"}[b]}
}

// errValue is an error result: data is its message where the tracer read
// it, nil where it read a nil one, else the interface's type word, which
// a table without layouts leaves it.
func errValue(name string, data any, text string) trace.Value {
	return trace.Value{Name: name, Type: "error", Kind: probe.Pointer, Data: data, Text: text}
}

// wantSpan is a span the collector must receive.
type wantSpan struct {
	name   string
	parent string // the parent span's name, "" for a root
	start  time.Time
	end    time.Time
	attrs  map[string]any
	// events are the span's events: name@µs.
	events []string
	status tracepb.Status_StatusCode
	msg    string
}

func TestSpans(t *testing.T) {
	g1, g2 := thread(1), thread(2)
	tests := []struct {
		name    string
		minSpan time.Duration
		events  []*trace.Event
		want    []wantSpan
	}{
		{
			name: "nested calls",
			events: []*trace.Event{
				g1.enter("main.(*Store).Get", 0, str("key", "k1")),
				g1.enter("main.load", 10, i64("n", -3, "-3")),
				g1.leave("main.load", 30, 20,
					boolean("ok", true),
					u64("p", 0xc000010000, probe.Pointer, "0xc000010000"),
					u64("big", 1<<63, probe.Uint64, "9223372036854775808"),
					u64("small", 7, probe.Uint32, "7"),
					errValue("err", nil, "<nil>")),
				g1.fire("cache__miss", 35, str("key", "k1")),
				g1.leave("main.(*Store).Get", 100, 100, errValue("err", "k1: not found", "k1: not found")),
			},
			want: []wantSpan{
				{
					name: "main.load", parent: "main.(*Store).Get", start: us(10), end: us(30),
					attrs: map[string]any{
						"code.function.name": "main.load", "goroutine": int64(1),
						"args.n": int64(-3), "results.ok": true, "results.p": "0xc000010000",
						"results.big": "9223372036854775808", "results.small": int64(7), "results.err": "<nil>",
					},
				},
				{
					name: "main.(*Store).Get", start: us(0), end: us(100),
					attrs: map[string]any{
						"code.function.name": "main.(*Store).Get", "goroutine": int64(1),
						"args.key": "k1", "results.err": "k1: not found",
					},
					events: []string{"shop:cache__miss@35 key=k1"},
					status: tracepb.Status_STATUS_CODE_ERROR, msg: "k1: not found",
				},
			},
		},
		{
			// The elapsed time the exit probe measured starts a call whose
			// entry was not seen; a usdtgen probe with no call open on its
			// thread is a span of its own.
			name: "exit alone and probe alone",
			events: []*trace.Event{
				inPackage("example.com/shop/pkg", g1.leave("pkg.Checkout", 50, 40, errValue("err", uint64(0x4a1b20), "0x4a1b20"))),
				g2.fire("job__done", 60, i64("id", 9, "9"), boolean("ok", false)),
				g2.leave("main.idle", 70, 5, errValue("err", uint64(0), "0x0")),
			},
			want: []wantSpan{
				{
					name: "pkg.Checkout", start: us(10), end: us(50),
					attrs: map[string]any{
						"code.function.name": "example.com/shop/pkg.Checkout", "goroutine": int64(1),
						"results.err": "0x4a1b20",
					},
					status: tracepb.Status_STATUS_CODE_ERROR, msg: "err is a non-nil error",
				},
				{
					name: "shop:job__done", start: us(60), end: us(60),
					attrs: map[string]any{"id": int64(9), "ok": false, "thread.id": int64(102)},
				},
				{
					name: "main.idle", start: us(65), end: us(70),
					attrs: map[string]any{
						"code.function.name": "main.idle", "goroutine": int64(2),
						"results.err": "0x0",
					},
				},
			},
		},
		{
			// Goroutines apart, each call in a trace of its own; a
			// generic method keeps its brackets in its namespace.
			name: "two roots",
			events: []*trace.Event{
				g1.enter("main.List[...].Len", 0),
				g2.enter("main.work", 1),
				g1.leave("main.List[...].Len", 2, 2),
				g2.leave("main.work", 3, 2),
			},
			want: []wantSpan{
				{
					name: "main.List[...].Len", start: us(0), end: us(2),
					attrs: map[string]any{"code.function.name": "main.List[...].Len", "goroutine": int64(1)},
				},
				{
					name: "main.work", start: us(1), end: us(3),
					attrs: map[string]any{"code.function.name": "main.work", "goroutine": int64(2)},
				},
			},
		},
		{
			// Calls shorter than -min-span leave no span: their own
			// children are shorter still, and are counted on the nearest
			// span kept, which gets their usdtgen probes' events; a short
			// root is dropped whole.
			name:    "min span",
			minSpan: 10 * time.Microsecond,
			events: []*trace.Event{
				g1.enter("main.handle", 0),
				g1.enter("main.parse", 1),
				g1.enter("main.token", 2),
				g1.fire("cache__miss", 3, str("key", "k1")),
				g1.leave("main.token", 4, 2),
				g1.leave("main.parse", 5, 4),
				g1.enter("main.query", 10),
				g1.leave("main.query", 40, 30),
				g1.leave("main.handle", 50, 50),
				g2.leave("main.short", 60, 5),
			},
			want: []wantSpan{
				{
					name: "main.query", parent: "main.handle", start: us(10), end: us(40),
					attrs: map[string]any{"code.function.name": "main.query", "goroutine": int64(1)},
				},
				{
					name: "main.handle", start: us(0), end: us(50),
					attrs:  map[string]any{"code.function.name": "main.handle", "goroutine": int64(1), "usdt.dropped_children": int64(2)},
					events: []string{"shop:cache__miss@3 key=k1"},
				},
			},
		},
		{
			// Strings of any bytes, as a program holds them: protobuf
			// refuses a request with one that is not valid UTF-8, and with
			// it the batch. They arrive escaped as the event lines show
			// them, with the other spans of the batch.
			name: "bad bytes",
			events: []*trace.Event{
				g1.enter("main.parse", 0, str("in", "TZif2\x00\x00\xff"), str("city", "Zürich\n")),
				g1.fire("cache__miss", 5, str("key", "k\xfe")),
				g1.leave("main.parse", 10, 10, errValue("err", "bad byte \xff", `bad byte \xff`)),
				g2.fire("job__done", 20, str("kind", "\xc3")),
				g2.leave("main.idle", 30, 5),
			},
			want: []wantSpan{
				{
					name: "main.parse", start: us(0), end: us(10),
					attrs: map[string]any{
						"code.function.name": "main.parse", "goroutine": int64(1),
						"args.in": `TZif2\x00\x00\xff`, "args.city": `Zürich\n`, "results.err": `bad byte \xff`,
					},
					events: []string{`shop:cache__miss@5 key=k\xfe`},
					status: tracepb.Status_STATUS_CODE_ERROR, msg: `bad byte \xff`,
				},
				{
					name: "shop:job__done", start: us(20), end: us(20),
					attrs: map[string]any{"kind": `\xc3`, "thread.id": int64(102)},
				},
				{
					name: "main.idle", start: us(25), end: us(30),
					attrs: map[string]any{"code.function.name": "main.idle", "goroutine": int64(2)},
				},
			},
		},
		{
			// Names of a binary nobody vouches for, as an Event could
			// hold them unescaped: a span's name, its attributes' keys
			// and a span event's name arrive escaped too.
			name: "names of escape sequences",
			events: []*trace.Event{
				g1.enter("main.\x1b0;pwned\a", 0, str("k\x1b[2J", "v")),
				g1.fire("p\x9b2J", 5),
				g1.leave("main.\x1b0;pwned\a", 10, 10),
			},
			want: []wantSpan{
				{
					name: `main.\x1b0;pwned\a`, start: us(0), end: us(10),
					attrs: map[string]any{
						"code.function.name": `main.\x1b0;pwned\a`, "goroutine": int64(1),
						`args.k\x1b[2J`: "v",
					},
					events: []string{`shop:p\x9b2J@5`},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, http.StatusOK, nil)
			e := newExporter(t, r)
			e.MinSpan = tt.minSpan
			for _, ev := range tt.events {
				e.Event(ev)
			}
			if err := e.Close(context.Background()); err != nil {
				t.Fatal("Close:", err)
			}
			spans, services := r.received()
			if len(spans) != len(tt.want) {
				t.Errorf("%d spans received, want %d", len(spans), len(tt.want))
			}
			byName := map[string]*tracepb.Span{}
			for i, s := range spans {
				byName[s.Name] = s
				if services[i] != "shop" {
					t.Errorf("span %s: service.name %q, want shop", s.Name, services[i])
				}
			}
			traces := map[string]string{}
			for _, w := range tt.want {
				s := byName[w.name]
				if s == nil {
					t.Errorf("no span %s", w.name)
					continue
				}
				checkSpan(t, s, w, byName)
				if w.parent == "" {
					if other, dup := traces[string(s.TraceId)]; dup {
						t.Errorf("roots %s and %s share trace %x", other, w.name, s.TraceId)
					}
					traces[string(s.TraceId)] = w.name
				}
			}
		})
	}
}

func checkSpan(t *testing.T, s *tracepb.Span, w wantSpan, byName map[string]*tracepb.Span) {
	t.Helper()
	if len(s.TraceId) != 16 || len(s.SpanId) != 8 || bytes.Equal(s.TraceId, make([]byte, 16)) || bytes.Equal(s.SpanId, make([]byte, 8)) {
		t.Errorf("span %s: trace id %x, span id %x", w.name, s.TraceId, s.SpanId)
	}
	if w.parent == "" {
		if len(s.ParentSpanId) != 0 {
			t.Errorf("span %s: parent %x, want none", w.name, s.ParentSpanId)
		}
	} else if p := byName[w.parent]; p == nil || !bytes.Equal(s.ParentSpanId, p.SpanId) || !bytes.Equal(s.TraceId, p.TraceId) {
		t.Errorf("span %s: parent %x in trace %x, want %s", w.name, s.ParentSpanId, s.TraceId, w.parent)
	}
	if got, want := time.Unix(0, int64(s.StartTimeUnixNano)), w.start; !got.Equal(want) {
		t.Errorf("span %s: starts %v, want %v", w.name, got.UTC(), want)
	}
	if got, want := time.Unix(0, int64(s.EndTimeUnixNano)), w.end; !got.Equal(want) {
		t.Errorf("span %s: ends %v, want %v", w.name, got.UTC(), want)
	}
	if got := attributes(s.Attributes); !mapsEqual(got, w.attrs) {
		t.Errorf("span %s: attributes\n%v\nwant\n%v", w.name, got, w.attrs)
	}
	var events []string
	for _, ev := range s.Events {
		line := ev.Name + "@" + time.Unix(0, int64(ev.TimeUnixNano)).Sub(origin).String()
		for _, kv := range ev.Attributes {
			line += " " + kv.Key + "=" + kv.Value.GetStringValue()
		}
		events = append(events, strings.Replace(line, "µs", "", 1))
	}
	if !slices.Equal(events, w.events) {
		t.Errorf("span %s: events %q, want %q", w.name, events, w.events)
	}
	if got := s.GetStatus(); got.GetCode() != w.status || got.GetMessage() != w.msg {
		t.Errorf("span %s: status %v %q, want %v %q", w.name, got.GetCode(), got.GetMessage(), w.status, w.msg)
	}
}

func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestServiceName: -service wins over the environment, which wins over
// the binary's name.
func TestServiceName(t *testing.T) {
	tests := []struct {
		name, service, env, want string
	}{
		{"binary", "", "", "shop"},
		{"environment", "", "from-env", "from-env"},
		{"flag", "checkout", "from-env", "checkout"},
		// Any bytes, which the resource of every span carries escaped.
		{"environment, not UTF-8", "", "caf\xe9\tbar", `caf\xe9\tbar`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, http.StatusOK, nil)
			t.Setenv("OTEL_SERVICE_NAME", tt.env)
			e, err := New(context.Background(), r.url+"/", tt.service, "shop", false)
			if err != nil {
				t.Fatal(err)
			}
			e.Event(thread(1).fire("tick", 0))
			if err := e.Close(context.Background()); err != nil {
				t.Fatal("Close:", err)
			}
			if _, services := r.received(); !slices.Equal(services, []string{tt.want}) {
				t.Errorf("service.name of the spans: %q, want [%s]", services, tt.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	for _, endpoint := range []string{"127.0.0.1:4318", "ftp://127.0.0.1:4318", "http://", "localhost", "http://[::1"} {
		_, err := New(context.Background(), endpoint, "", "shop", false)
		want := "-otlp " + endpoint + ": want the collector's base URL, such as http://127.0.0.1:4318"
		if err == nil || err.Error() != want {
			t.Errorf("New(%q): %v, want %s", endpoint, err, want)
		}
	}
}

// TestCloseReports: what did not reach the collector is reported, never
// lost in silence.
func TestCloseReports(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		status int  // the collector's answer
		hold   bool // the collector keeps the first export waiting
		events int  // usdtgen probes fired, each a span
		open   int  // calls left open
		want   string
	}{
		{
			name: "collector rejects", status: http.StatusBadRequest, events: 3,
			want: `^3 spans not sent to http://127\.0\.0\.1:\d+: traces export: failed to send to http://127\.0\.0\.1:\d+/v1/traces: 400 Bad Request \(body: rejected by the test\)$`,
		},
		{
			name: "calls open", status: http.StatusOK, open: 2,
			want: `^2 calls had not returned when tracing ended, or their exit events were lost: their spans \(usdt.lost_exit\) end with the last call they made$`,
		},
		{
			// A queue of one span and exports of one: while the first
			// waits on the collector, one more is queued and the rest
			// are dropped.
			name: "queue full", status: http.StatusOK, hold: true, events: 50,
			env:  map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "1", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1"},
			want: `^lost (\d+) spans: the exporter's queue was full \(OTEL_BSP_MAX_QUEUE_SIZE raises it\)$`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var hold chan struct{}
			if tt.hold {
				hold = make(chan struct{})
			}
			r := newReceiver(t, tt.status, hold)
			e := newExporter(t, r)
			for i := range tt.events {
				e.Event(thread(1).fire("tick", i))
			}
			for i := range tt.open {
				e.Event(thread(i+1).enter("main.serve", i))
			}
			if hold != nil {
				close(hold)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := e.Close(ctx)
			if err == nil {
				t.Fatalf("Close: no error, want %s", tt.want)
			}
			m := regexp.MustCompile(tt.want).FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("Close: %v\nwant %s", err, tt.want)
			}
			if tt.open > 0 {
				spans, _ := r.received()
				for _, s := range spans {
					if attributes(s.Attributes)["usdt.lost_exit"] != true {
						t.Errorf("%s's span, open when tracing ended, is not marked usdt.lost_exit", s.Name)
					}
				}
				if len(spans) != tt.open {
					t.Errorf("%d spans received, want one per open call, %d", len(spans), tt.open)
				}
			}
			if hold != nil {
				// Every span is either received or reported lost.
				spans, _ := r.received()
				if lost, _ := strconv.Atoi(m[1]); len(spans)+lost != tt.events {
					t.Errorf("%d spans received and %s lost, want %d in all", len(spans), m[1], tt.events)
				}
			}
			// The metrics count what Close reports: the SDK's own count
			// of the queue's drops, the exporter's of the rest.
			wantDropped := map[string]uint64{"export_failed": 0, "refused": 0, "queue_full": 0}
			switch {
			case tt.hold:
				n, _ := strconv.Atoi(m[1])
				wantDropped["queue_full"] = uint64(n)
			case tt.status != http.StatusOK:
				wantDropped["export_failed"] = uint64(tt.events)
			}
			if got := e.Dropped(); !maps.Equal(got, wantDropped) {
				t.Errorf("Dropped() = %v, want %v", got, wantDropped)
			}
		})
	}
}

// TestBlockingQueue: with block (trace's -block), TestCloseReports'
// queue of one span, whose first export the collector keeps waiting,
// makes the spans wait for room instead of dropping them: every one
// reaches the collector, and Close reports nothing.
func TestBlockingQueue(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
	hold := make(chan struct{})
	r := newReceiver(t, http.StatusOK, hold)
	e, err := New(context.Background(), r.url, "", "shop", true)
	if err != nil {
		t.Fatal(err)
	}
	const events = 50
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range events {
			e.Event(thread(1).fire("tick", i))
		}
	}()
	select {
	case <-done:
		t.Fatal("50 spans went into a queue of one while the collector held the first export")
	case <-time.After(200 * time.Millisecond):
	}
	close(hold)
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Errorf("Close: %v, want every span sent", err)
	}
	if spans, _ := r.received(); len(spans) != events {
		t.Errorf("%d spans received, want all %d", len(spans), events)
	}
	if got := e.Dropped(); got["queue_full"] != 0 {
		t.Errorf("Dropped() = %v, want none for a full queue", got)
	}
}

// TestRefused: a span holding a string that is not valid UTF-8, which
// protobuf would refuse with its whole request, is kept back and named
// at Close, and the rest of its batch is sent. Such a span is made here
// past the exporter's escaping, as a string it did not escape would make
// it.
func TestRefused(t *testing.T) {
	ok := attribute.String("args.s", "fine")
	tests := []struct {
		name, span string
		attrs      []attribute.KeyValue
		event      string
		eventAttrs []attribute.KeyValue
		status     string
		want       string
	}{
		{name: "span name", span: "main.f\xff", want: `the name of span "main.f\xff"`},
		{name: "attribute value", span: "main.f", attrs: []attribute.KeyValue{ok, attribute.String("args.b", "\xff")}, want: `attribute "args.b" of span "main.f"`},
		{name: "attribute key", span: "main.f", attrs: []attribute.KeyValue{attribute.Bool("args.\xfe", true)}, want: `attribute "args.\xfe" of span "main.f"`},
		{name: "event name", span: "main.f", event: "shop:\xc3", want: `the name of event "shop:\xc3" of span "main.f"`},
		{name: "event attribute", span: "main.f", event: "shop:tick", eventAttrs: []attribute.KeyValue{ok, attribute.String("key", "k\xfe")}, want: `attribute "key" of event "shop:tick" of span "main.f"`},
		{name: "status", span: "main.f", status: "no \xff", want: `the status message of span "main.f"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, http.StatusOK, nil)
			e := newExporter(t, r)
			const good = 3
			for i := range good {
				e.Event(thread(1).fire("tick", i))
			}
			_, span := e.process(4242).tracer.Start(context.Background(), tt.span, oteltrace.WithAttributes(tt.attrs...))
			if tt.event != "" {
				span.AddEvent(tt.event, oteltrace.WithAttributes(tt.eventAttrs...))
			}
			if tt.status != "" {
				span.SetStatus(codes.Error, tt.status)
			}
			span.End()
			e.ended++
			err := e.Close(context.Background())
			want := "1 spans not sent: protobuf refuses strings that are not valid UTF-8, such as " + tt.want
			if err == nil || err.Error() != want {
				t.Errorf("Close: %v\nwant %s", err, want)
			}
			if spans, _ := r.received(); len(spans) != good {
				t.Errorf("%d spans received, want the %d of the batch that are valid", len(spans), good)
			}
		})
	}
}

// TestIDs: a call's span gets the ids it was given when it opened, which
// its children already carry as their parent's.
func TestIDs(t *testing.T) {
	var ids presetIDs
	tr, sp := ids.NewIDs(context.Background())
	if !tr.IsValid() || !sp.IsValid() {
		t.Errorf("random ids %v %v are not valid", tr, sp)
	}
	p := preset{trace: tr, span: sp}
	ctx := context.WithValue(context.Background(), presetKey{}, p)
	if gt, gs := ids.NewIDs(ctx); gt != tr || gs != sp {
		t.Errorf("NewIDs with preset ids: %s %s, want %s %s", gt, gs, tr, sp)
	}
	if gs := ids.NewSpanID(ctx, tr); gs != sp {
		t.Errorf("NewSpanID with preset ids: %s, want %s", gs, sp)
	}
	if gs := ids.NewSpanID(context.Background(), tr); gs == sp || !gs.IsValid() {
		t.Errorf("NewSpanID without preset ids: %s", hex.EncodeToString(gs[:]))
	}
}

// TestAdoptedRoot: main.serve's entry was lost, and its exit shows it
// began before main.handle, a root until then: handle becomes serve's
// child, and serve's span joins the trace that handle's calls were sent
// in, so that none of them is left without its parent there.
func TestAdoptedRoot(t *testing.T) {
	g := thread(1)
	r := newReceiver(t, http.StatusOK, nil)
	e := newExporter(t, r)
	// serve's exit is the first event after the loss.
	serve := g.leave("main.serve", 600, 300)
	serve.AfterLoss = true
	for _, ev := range []*trace.Event{
		g.enter("main.handle", 500),
		g.enter("main.parse", 510),
		g.leave("main.parse", 520, 10),
		serve,
	} {
		e.Event(ev)
	}
	e.Close(context.Background())
	spans, _ := r.received()
	checkSpans(t, spans, []wantSpan{
		{name: "main.parse", parent: "main.handle", start: us(510), end: us(520), attrs: mainAttrs("parse", nil)},
		{name: "main.handle", parent: "main.serve", start: us(500), end: us(520), attrs: mainAttrs("handle", map[string]any{"usdt.lost_exit": true})},
		{name: "main.serve", start: us(300), end: us(600), attrs: mainAttrs("serve", nil)},
	})
}

// TestUnwound: with no event lost, a call whose exit never came did not
// return: a panic went through it, and its caller recovered. Its span
// says so (usdt.unwound, status error), inside its caller's, and Close
// counts it apart from lost exits.
func TestUnwound(t *testing.T) {
	g := thread(1)
	r := newReceiver(t, http.StatusOK, nil)
	e := newExporter(t, r)
	for _, ev := range []*trace.Event{
		g.enter("main.handle", 0),
		g.enter("main.parse", 1),
		g.enter("main.token", 2),
		g.leave("main.token", 4, 2),
		g.leave("main.handle", 10, 10),
	} {
		e.Event(ev)
	}
	err := e.Close(context.Background())
	want := "1 calls on 1 goroutines did not return, with none of their events lost: a panic unwound them (and a caller recovered it); their spans (usdt.unwound, status error) end with the last call they made"
	if err == nil || err.Error() != want {
		t.Errorf("Close: %v, want %s", err, want)
	}
	spans, _ := r.received()
	checkSpans(t, spans, []wantSpan{
		{name: "main.token", parent: "main.parse", start: us(2), end: us(4), attrs: mainAttrs("token", nil)},
		{name: "main.parse", parent: "main.handle", start: us(1), end: us(4), attrs: mainAttrs("parse", map[string]any{"usdt.unwound": true}), status: tracepb.Status_STATUS_CODE_ERROR, msg: "a panic unwound the call"},
		{name: "main.handle", start: us(0), end: us(10), attrs: mainAttrs("handle", nil)},
	})
}

// mainAttrs are the attributes of a span of function main.fn on goroutine
// 1, and more.
func mainAttrs(fn string, more map[string]any) map[string]any {
	m := map[string]any{"code.function.name": "main." + fn, "goroutine": int64(1)}
	maps.Copy(m, more)
	return m
}

// checkSpans checks that spans has each of want.
func checkSpans(t *testing.T, spans []*tracepb.Span, want []wantSpan) {
	t.Helper()
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	for _, w := range want {
		if s := byName[w.name]; s == nil {
			t.Errorf("no span %s", w.name)
		} else {
			checkSpan(t, s, w, byName)
		}
	}
}

// TestLostExit checks that a call whose exit event was lost still gets a
// span, marked, inside its parent's, so that the spans of the calls it
// made are not orphans, and that Close says how many. main.emit, which
// handle called after parse returned in the loss, is taken for parse's
// child: its span says its parent is uncertain.
func TestLostExit(t *testing.T) {
	g := thread(1)
	r := newReceiver(t, http.StatusOK, nil)
	e := newExporter(t, r)
	emit := g.enter("main.emit", 5)
	emit.AfterLoss = true
	for _, ev := range []*trace.Event{
		g.enter("main.handle", 0),
		g.enter("main.parse", 1),
		g.enter("main.token", 2),
		g.leave("main.token", 4, 2),
		emit,
		g.leave("main.emit", 6, 1),
		g.leave("main.handle", 10, 10),
	} {
		e.Event(ev)
	}
	err := e.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "1 calls on 1 goroutines lost their exit event") {
		t.Errorf("Close: %v, want it to count the lost exit", err)
	}
	if err == nil || !strings.Contains(err.Error(), "1 calls on 1 goroutines began after events of theirs were lost") {
		t.Errorf("Close: %v, want it to count the uncertain parent", err)
	}
	spans, _ := r.received()
	checkSpans(t, spans, []wantSpan{
		{name: "main.token", parent: "main.parse", start: us(2), end: us(4), attrs: mainAttrs("token", nil)},
		{name: "main.emit", parent: "main.parse", start: us(5), end: us(6), attrs: mainAttrs("emit", map[string]any{"usdt.parent_uncertain": true})},
		{name: "main.parse", parent: "main.handle", start: us(1), end: us(6), attrs: mainAttrs("parse", map[string]any{"usdt.lost_exit": true})},
		{name: "main.handle", start: us(0), end: us(10), attrs: mainAttrs("handle", nil)},
	})
}

// TestJoin: a root call whose entry passes a W3C traceparent joins that
// trace under that span, with its tracestate, and its children follow; a
// traceparent not sampled sends no span of its calls, and Close says so;
// one that is not valid leaves the call a trace of its own. A rule's
// attributes keep their names, and the context is no attribute.
func TestJoin(t *testing.T) {
	g1, g2, g3 := thread(1), thread(2), thread(3)
	r := newReceiver(t, http.StatusOK, nil)
	e := newExporter(t, r)
	for _, ev := range []*trace.Event{
		g1.enter("main.serve", 0, str("path", "/a"), str("order.path", "/a"),
			str(trace.TraceParentKey, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), str(trace.TraceStateKey, "shop=a,gw=1")),
		g1.enter("main.price", 1),
		g1.leave("main.price", 2, 1),
		g1.leave("main.serve", 3, 3),
		g2.enter("main.serve", 4, str(trace.TraceParentKey, "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b8-00")),
		g2.enter("main.price", 5),
		g2.leave("main.price", 6, 1),
		g2.leave("main.serve", 7, 3),
		g3.enter("main.serve", 8, str(trace.TraceParentKey, "00-00000000000000000000000000000000-00f067aa0ba902b8-01")),
		g3.leave("main.serve", 9, 1),
	} {
		e.Event(ev)
	}
	err := e.Close(context.Background())
	if want := "2 calls joined traces their callers did not sample"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Close: %v, want %q", err, want)
	}
	spans, _ := r.received()
	if len(spans) != 3 {
		t.Fatalf("%d spans received, want 3: the sampled request's two and the invalid one's", len(spans))
	}
	var joined, child, alone *tracepb.Span
	for _, s := range spans {
		switch {
		case s.Name == "main.price":
			child = s
		case len(s.ParentSpanId) > 0:
			joined = s
		default:
			alone = s
		}
	}
	if joined == nil || child == nil || alone == nil {
		t.Fatalf("spans %v: want main.serve joined, main.price and main.serve alone", spans)
	}
	if got := hex.EncodeToString(joined.TraceId); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("joined main.serve in trace %s", got)
	}
	if got := hex.EncodeToString(joined.ParentSpanId); got != "00f067aa0ba902b7" {
		t.Errorf("joined main.serve's parent %s", got)
	}
	if joined.TraceState != "shop=a,gw=1" {
		t.Errorf("joined main.serve's tracestate %q", joined.TraceState)
	}
	if !bytes.Equal(child.TraceId, joined.TraceId) || !bytes.Equal(child.ParentSpanId, joined.SpanId) {
		t.Errorf("main.price in trace %x under %x, want main.serve's %x under %x", child.TraceId, child.ParentSpanId, joined.TraceId, joined.SpanId)
	}
	attrs := attributes(joined.Attributes)
	if attrs["args.path"] != "/a" || attrs["order.path"] != "/a" {
		t.Errorf("joined main.serve's attributes %v, want args.path and order.path", attrs)
	}
	for key := range attrs {
		if strings.Contains(key, "trace") {
			t.Errorf("the trace context is an attribute: %s", key)
		}
	}
	if bytes.Equal(alone.TraceId, joined.TraceId) || len(alone.ParentSpanId) != 0 {
		t.Errorf("main.serve with an invalid traceparent: trace %x, parent %x; want a trace of its own", alone.TraceId, alone.ParentSpanId)
	}
}

// TestObservabilityNotInherited: the variable that turns on the SDK's
// count of the queue's drops is set while New makes the processor, and
// not after: the commands trace runs, which inherit its environment, must
// not find it.
func TestObservabilityNotInherited(t *testing.T) {
	t.Setenv(observability, "")
	os.Unsetenv(observability)
	e, err := New(context.Background(), "http://127.0.0.1:1", "", "shop", false)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if v, ok := os.LookupEnv(observability); ok {
		t.Errorf("after New, %s=%q, want it unset as before", observability, v)
	}
}
