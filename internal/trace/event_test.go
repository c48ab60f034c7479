package trace

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestEventOutputs(t *testing.T) {
	at := time.Date(2026, 11, 26, 13, 4, 5, 123456000, time.UTC)
	tests := []struct {
		name       string
		ev         Event
		text, json string
	}{
		{
			name: "usdtgen probe",
			ev: Event{Time: at, PID: 10, TID: 11, Provider: "shop", Probe: "order__placed",
				values: []Value{{Name: "id", Data: int64(-3), Text: "-3"}, {Name: "who", Data: "ann", Text: `"ann"`}}},
			text: `13:04:05.123456 pid=10 tid=11 shop:order__placed(id=-3, who="ann")`,
			json: `{"time":"2026-11-26T13:04:05.123456Z","pid":10,"tid":11,"provider":"shop","probe":"order__placed","args":{"id":-3,"who":"ann"}}`,
		},
		{
			name: "entry",
			ev: Event{Time: at, PID: 10, TID: 11, Provider: "usdt_main", Probe: "entry", Function: "main.(*Cache).Get", Package: "main", Paired: true, Goroutine: 7,
				values: []Value{{Name: "key", Data: "k1", Text: `"k1"`}}},
			text: `13:04:05.123456 g=7 main.(*Cache).Get(key="k1")`,
			json: `{"time":"2026-11-26T13:04:05.123456Z","pid":10,"tid":11,"provider":"usdt_main","probe":"entry","function":"main.(*Cache).Get","goroutine":7,"args":{"key":"k1"}}`,
		},
		{
			name: "exit with a dropped result",
			ev: Event{Time: at, PID: 10, TID: 11, Provider: "usdt_main", Probe: "exit", Function: "main.load", Exit: true, Goroutine: 7, Elapsed: 1500 * time.Nanosecond,
				values: []Value{{Name: "r1", Data: uint64(14), Text: "14"}}, Dropped: []string{"r2"}},
			text: `13:04:05.123456 g=7 main.load = (r1=14; dropped: r2) 1.5µs`,
			json: `{"time":"2026-11-26T13:04:05.123456Z","pid":10,"tid":11,"provider":"usdt_main","probe":"exit","function":"main.load","goroutine":7,"results":{"r1":14},"elapsed_ns":1500,"dropped":["r2"]}`,
		},
		{
			name: "exit with its start",
			ev: Event{Time: at, PID: 10, TID: 11, Provider: "usdt_main", Probe: "exit", Function: "main.load", Exit: true, Goroutine: 7, Elapsed: 1500 * time.Nanosecond,
				Start: time.Date(2026, 11, 26, 13, 4, 5, 123450001, time.UTC)},
			text: `13:04:05.123456 g=7 main.load = () 1.5µs`,
			json: `{"time":"2026-11-26T13:04:05.123456Z","pid":10,"tid":11,"provider":"usdt_main","probe":"exit","function":"main.load","goroutine":7,"results":{},"elapsed_ns":1500,"start":"2026-11-26T13:04:05.123450001Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tt.ev.AppendText(nil)); got != tt.text {
				t.Errorf("text\n got %s\nwant %s", got, tt.text)
			}
			got, err := json.Marshal(&tt.ev)
			if err != nil || string(got) != tt.json {
				t.Errorf("json: %v\n got %s\nwant %s", err, got, tt.json)
			}
		})
	}
}

// TestStringArgumentBytes checks that a probe's C string argument keeps
// its invalid bytes visible in both forms, as Go's %q escapes them.
func TestStringArgumentBytes(t *testing.T) {
	for _, tt := range []struct{ in, text, json string }{
		{"plain", `"plain"`, `"plain"`},
		{"a\xffb", `"a\xffb"`, `"a\\xffb"`},
		{"tab\there", `"tab\there"`, `"tab\there"`},
	} {
		v := value{str: &tt.in}
		if got := v.String(); got != tt.text {
			t.Errorf("%q: text %s, want %s", tt.in, got, tt.text)
		}
		if got, err := json.Marshal(v.json()); err != nil || string(got) != tt.json {
			t.Errorf("%q: json %s (%v), want %s", tt.in, got, err, tt.json)
		}
	}
}

// jsonEvents are events whose -json lines AppendJSON writes by hand:
// each kind of value, and strings with every byte encoding/json escapes.
func jsonEvents() []Event {
	at := time.Date(2026, 11, 26, 13, 4, 5, 123456789, time.FixedZone("", 3600))
	odd := "<a&b> \"q\" \\ \b\f\n\r\t\x00\x1f\x7f é \u2028\u2029 \xff\xfe end"
	return []Event{
		{Time: at, PID: 10, TID: 11, Provider: "shop", Probe: "order__placed",
			values: []Value{{Name: "id", Data: int64(-3)}, {Name: "who", Data: odd}, {Name: "n", Data: uint64(1 << 63)}, {Name: "ok", Data: true}, {Name: "nothing", Data: nil}}},
		{Time: at, PID: 1, TID: 2, Provider: "usdt_main", Probe: "entry", Function: "main.(*Cache).Get<" + odd, Goroutine: 1<<64 - 1,
			values: []Value{{Name: odd, Data: map[string]any{"k": []any{1.5, "x", nil}}}, {Name: "f", Data: 0.000001}}},
		{Time: at, Provider: "p", Probe: "exit", Function: "f", Exit: true, Elapsed: -1, AfterLoss: true,
			Start: at.Add(-time.Nanosecond), Dropped: []string{"r2", odd}},
		{Provider: "", Probe: "", Exit: true},
	}
}

// TestAppendJSON: AppendJSON writes what encoding/json writes for the
// same ordered object.
func TestAppendJSON(t *testing.T) {
	for i, e := range jsonEvents() {
		o := object{{"time", e.Time.Format(time.RFC3339Nano)}, {"pid", e.PID}, {"tid", e.TID}, {"provider", e.Provider}, {"probe", e.Probe}}
		if e.Function != "" {
			o = append(o, field{"function", e.Function}, field{"goroutine", e.Goroutine})
		}
		vals := object{}
		for _, v := range e.Values() {
			vals = append(vals, field{v.Name, v.Data})
		}
		if e.Exit {
			o = append(o, field{"results", vals}, field{"elapsed_ns", int64(e.Elapsed)})
			if !e.Start.IsZero() {
				o = append(o, field{"start", e.Start.Format(time.RFC3339Nano)})
			}
		} else {
			o = append(o, field{"args", vals})
		}
		if len(e.Dropped) > 0 {
			o = append(o, field{"dropped", e.Dropped})
		}
		if e.AfterLoss {
			o = append(o, field{"after_loss", true})
		}
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.AppendJSON([]byte("kept"))
		// Go 1.27's encoding/json writes U+FFFD for an invalid byte
		// itself, 1.26's escapes it, as AppendJSON does.
		unescaped := strings.ReplaceAll(string(got), `\ufffd`, "\uFFFD")
		if err != nil || unescaped != "kept"+strings.ReplaceAll(string(want), `\ufffd`, "\uFFFD") {
			t.Errorf("event %d: %v\n got %s\nwant kept%s", i, err, got, want)
		}
	}
}

// BenchmarkAppendJSON is the -json printer's work for an entry with two
// integer arguments and a string.
func BenchmarkAppendJSON(b *testing.B) {
	e := Event{Time: time.Now(), PID: 10, TID: 11, Provider: "usdt_main", Probe: "entry", Function: "main.handle", Goroutine: 7,
		values: []Value{{Name: "a", Data: int64(3)}, {Name: "b", Data: int64(-9)}, {Name: "path", Data: "/api/orders/17"}}}
	var line []byte
	b.ReportAllocs()
	for b.Loop() {
		line, _ = e.AppendJSON(line[:0])
	}
}
