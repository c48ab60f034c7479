package inspect

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

func TestShorten(t *testing.T) {
	long := "pkg." + strings.Repeat("a", 40) + "." + strings.Repeat("b", 40)
	tests := []struct {
		name  string
		seen  []string
		label string
		want  string
	}{
		{"short", nil, "orders.Store.Place", "orders.Store.Place"},
		{"63 bytes", nil, long[:63], long[:63]},
		{"long", nil, long, long[:30] + "..." + long[len(long)-30:]},
		{"long twice", []string{long[:30] + "..." + long[len(long)-30:]}, long, long[:30] + ".1." + long[len(long)-30:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[string]bool{}
			for _, s := range tt.seen {
				seen[s] = true
			}
			got := shorten(tt.label, seen)
			if got != tt.want || len(got) > maxLabel || !seen[got] {
				t.Errorf("shorten(%q) = %q (%d bytes, seen %v), want %q", tt.label, got, len(got), seen[got], tt.want)
			}
		})
	}
}

// btLabels are labels as readProbes leaves them (escaped: no control
// characters), with what a receiver in a table nobody vouches for may
// add: quotes, backslashes, script text.
var btLabels = []struct{ label, literal string }{
	{"main.(*Cache).Get", `"main.(*Cache).Get"`},
	{`main.\x1b]0;pwned\a\x1b[2J`, `"main.\\x1b]0;pwned\\a\\x1b[2J"`},
	{`main.T"x.Get`, `"main.T\"x.Get"`},
	{`m.T"] = 1; } BEGIN { @x["`, `"m.T\"] = 1; } BEGIN { @x[\""`},
	{`main.T\`, `"main.T\\"`},
}

func TestBtString(t *testing.T) {
	for _, tt := range btLabels {
		if got := btString(tt.label); got != tt.literal {
			t.Errorf("btString(%q) = %s, want %s", tt.label, got, tt.literal)
		}
	}
}

// TestBtStringBpftrace has each bpftrace print the literals btString
// makes: each is one string, whose value is the label.
func TestBtStringBpftrace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bpftrace runs a BEGIN probe as root only")
	}
	var script strings.Builder
	script.WriteString("BEGIN {\n")
	for _, tt := range btLabels {
		fmt.Fprintf(&script, "\tprintf(\"[%%s]\\n\", %s);\n", btString(tt.label))
	}
	script.WriteString("\texit();\n}\n")
	for _, bt := range tracetest.Bpftraces() {
		t.Run(bt.Name, func(t *testing.T) {
			bt.Require(t)
			out, err := bt.Output(time.Minute, "", "-e", script.String())
			if err != nil {
				t.Fatalf("%v\nscript:\n%s", err, script.String())
			}
			for _, tt := range btLabels {
				if !strings.Contains(out, "\n["+tt.label+"]\n") {
					t.Errorf("bpftrace does not print [%s]:\n%s\nscript:\n%s", tt.label, out, script.String())
				}
			}
		})
	}
}
