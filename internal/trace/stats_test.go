package trace

import (
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
	"github.com/go-usdt/usdt/internal/trace/bpfprog"
)

// TestStatsUntimed: a function counted at a timed site (a copy's exit
// probe, arg1 its elapsed time) and at a note on its own code (no
// time) prints all its calls, says how many are untimed, and takes
// the mean over the timed ones; one counted at notes alone prints its
// calls without a time.
func TestStatsUntimed(t *testing.T) {
	copyExit := site{Provider: "p", Name: "exit__main__f", fn: "main.f", exit: true, args: make([]bpfprog.Arg, 2)}
	noteExit := copyExit
	noteExit.table = probe.Probe{Func: "main.f"}
	onlyNote := noteExit
	onlyNote.Name, onlyNote.fn, onlyNote.table.Func = "exit__main__g", "main.g", "main.g"
	gCopy := copyExit
	gCopy.Name, gCopy.fn = "exit__main__g", "main.g"
	for _, tc := range []struct {
		name   string
		sites  []site
		counts func(l statLayout, c []uint64)
		want   string
	}{
		{"timed and untimed", []site{copyExit, noteExit}, func(l statLayout, c []uint64) {
			c[l.first[0]] = 300   // total ns
			c[l.first[0]+1+7] = 3 // three calls in one bucket
			c[l.first[1]] = 2
		}, "main.f: 5 calls, total 300ns, mean 100ns (2 of them at the notes on its code as compiled, untimed)\n"},
		{"untimed alone", []site{gCopy, onlyNote}, func(l statLayout, c []uint64) {
			c[l.first[1]] = 4
		}, "main.g: 4 calls\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newStatLayout(tc.sites)
			c := make([]uint64, l.slots)
			tc.counts(l, c)
			all := tally(tc.sites, l, c)
			if len(all) != 1 {
				t.Fatalf("tally gave %d functions, want 1", len(all))
			}
			var b strings.Builder
			all[0].text(&b)
			if first, _, _ := strings.Cut(b.String(), "\n"); first+"\n" != tc.want {
				t.Errorf("printed %q, want %q", first+"\n", tc.want)
			}
		})
	}
}
