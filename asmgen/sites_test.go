package asmgen

import (
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

func TestPlan9Sites(t *testing.T) {
	tramps := []Trampoline{{Symbol: "tr0", Kinds: []probe.Kind{probe.Int64, probe.String}}}
	p := func(name string, kinds ...probe.Kind) probe.Probe {
		pr := probe.Probe{Provider: "p", Name: name}
		for _, k := range kinds {
			pr.Args = append(pr.Args, probe.Arg{Kind: k})
		}
		return pr
	}
	tests := []struct {
		name  string
		arch  Arch
		sites []Site
		want  []string // lines the file must contain
		err   string
	}{
		{"amd64", AMD64, []Site{{Probe: p("a", probe.Int64, probe.String)}, {Probe: p("b", probe.Int64, probe.String)}}, []string{
			"TEXT ·tr0(SB), 516, $0-16\n", // the site index, then the arguments after the goroutine id
			"\tLEAQ (CX)(AX*8), CX\n",
			"\tBYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00; BYTE $0xc3; BYTE $0xcc; BYTE $0xcc // p:a\n",
			"DATA ·tab+0(SB)/8, $0x046f67544453557f\n", // version 4: the sites back to back
			"DATA ·tab+32(SB)/8, $·sites+0(SB)\n",      // the first site's address, alone
		}, ""},
		{"arm64", ARM64, []Site{{Probe: p("a", probe.Int64, probe.String)}, {Probe: p("b", probe.Int64, probe.String)}}, []string{
			"\tADD R0<<3, R1, R1\n",
			"DATA ·tab+32(SB)/8, $·sites+0(SB)\n",
		}, ""},
		{"kinds differ", AMD64, []Site{{Probe: p("a", probe.Int64)}}, nil, "p:a does not match its trampoline"},
		{"no trampoline", AMD64, []Site{{Probe: p("a", probe.Int64, probe.String), Trampoline: 1}}, nil, "p:a does not match its trampoline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, l, err := Plan9Sites(tt.arch, "", "pkg", "tab", "sites", 152, tramps, tt.sites)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Count != len(tt.sites) {
				t.Errorf("layout counts %d probes, want %d", l.Count, len(tt.sites))
			}
			for _, w := range tt.want {
				if !strings.Contains(string(src), w) {
					t.Errorf("no %q in\n%s", w, src)
				}
			}
			if strings.Contains(string(src), "$·sites+8(SB)") {
				t.Errorf("the table holds the second site's address too:\n%s", src)
			}
		})
	}
}
