package toolexec

import (
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/inlining"
	"github.com/go-usdt/usdt/rewrite"
	"github.com/go-usdt/usdt/rules"
)

// TestUnprobed checks what a build says of the selected functions that
// get no probes: each by name, -v or not, unless inline: keep left it
// unprobed by the user's choice, which without -v one line per rule
// counts; and of those sites: switch would leave as written but cannot,
// each by name, -v or not.
func TestUnprobed(t *testing.T) {
	r1, r2 := rules.Pos{File: "rules.yml", Line: 3, Col: 5}, rules.Pos{File: "rules.yml", Line: 9, Col: 5}
	funcs := []rewrite.Func{
		{Name: "Probed", Entry: "entry__p__Probed", Rule: r1},
		{Name: "Map", Notes: true, Unprobed: "it is generic: its instantiations share code by shape, under other names", Rule: r1},
		{Name: "small", Inlined: &inlining.Decision{Inlinable: true, Cost: 6}, Rule: r2},
		{Name: "tiny", Inlined: &inlining.Decision{Inlinable: true, Cost: 2}, Rule: r2},
		{Name: "Switched", Entry: "entry__p__Switched", Switch: true, Traced: "Switched_usdtTraced", Rule: r1},
		{Name: "Safe", Entry: "entry__p__Safe", NoSwitch: "it calls recover, which stops a panic only in the function deferred itself", Rule: r1},
	}
	for _, tt := range []struct {
		verbose bool
		want    []string
	}{
		{false, []string{
			"usdt-toolexec: example.com/p.Map: not probed: it is generic: its instantiations share code by shape, under other names (the rule at rules.yml:3:5)",
			"usdt-toolexec: example.com/p.Safe: no traced copy for sites: switch: it calls recover, which stops a panic only in the function deferred itself; it is instrumented as with sites: code (the rule at rules.yml:3:5)",
			"usdt-toolexec: example.com/p: 2 functions not probed: the compiler inlines them, and inline: keep in the rule at rules.yml:9:5 keeps them as written (-v names them)",
		}},
		{true, []string{
			"usdt-toolexec: example.com/p.Map: not probed: it is generic: its instantiations share code by shape, under other names (the rule at rules.yml:3:5)",
			"usdt-toolexec: example.com/p.small: not probed: the compiler inlines it (cost 6 of 80), and inline: keep in its rule (rules.yml:9:5) keeps it as written",
			"usdt-toolexec: example.com/p.tiny: not probed: the compiler inlines it (cost 2 of 80), and inline: keep in its rule (rules.yml:9:5) keeps it as written",
			"usdt-toolexec: example.com/p.Safe: no traced copy for sites: switch: it calls recover, which stops a panic only in the function deferred itself; it is instrumented as with sites: code (the rule at rules.yml:3:5)",
		}},
	} {
		var b strings.Builder
		unprobed(&b, "example.com/p", funcs, tt.verbose)
		if got, want := b.String(), strings.Join(tt.want, "\n")+"\n"; got != want {
			t.Errorf("verbose %v: got\n%s\nwant\n%s", tt.verbose, got, want)
		}
	}
}
