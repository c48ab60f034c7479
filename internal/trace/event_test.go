package trace

import (
	"encoding/json"
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
				Values: []Value{{Name: "id", Data: int64(-3), Text: "-3"}, {Name: "who", Data: "ann", Text: `"ann"`}}},
			text: `13:04:05.123456 pid=10 tid=11 shop:order__placed(id=-3, who="ann")`,
			json: `{"time":"2026-11-26T13:04:05.123456Z","pid":10,"tid":11,"provider":"shop","probe":"order__placed","args":{"id":-3,"who":"ann"}}`,
		},
		{
			name: "entry",
			ev: Event{Time: at, PID: 10, TID: 11, Provider: "usdt_main", Probe: "entry", Function: "main.(*Cache).Get", Package: "main", Paired: true, Goroutine: 7,
				Values: []Value{{Name: "key", Data: "k1", Text: `"k1"`}}},
			text: `13:04:05.123456 g=7 main.(*Cache).Get(key="k1")`,
			json: `{"time":"2026-11-26T13:04:05.123456Z","pid":10,"tid":11,"provider":"usdt_main","probe":"entry","function":"main.(*Cache).Get","goroutine":7,"args":{"key":"k1"}}`,
		},
		{
			name: "exit with a dropped result",
			ev: Event{Time: at, PID: 10, TID: 11, Provider: "usdt_main", Probe: "exit", Function: "main.load", Exit: true, Goroutine: 7, Elapsed: 1500 * time.Nanosecond,
				Values: []Value{{Name: "r1", Data: uint64(14), Text: "14"}}, Dropped: []string{"r2"}},
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
