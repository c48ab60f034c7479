package asmgen

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// TestBucketTree follows the bucket function's compares and jumps for
// every bucket number, and for those past the last bucket, to the
// increment it reaches: bucket b's counter is 8*(1+b) past the site's
// total.
func TestBucketTree(t *testing.T) {
	var b bytes.Buffer
	bucketFunc(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")[1:]
	labels := map[string]int{}
	for i, l := range lines {
		if name, ok := strings.CutSuffix(l, ":"); ok {
			labels[name] = i
		}
	}
	for dx := 0; dx < ringlayout.HistBuckets+3; dx++ {
		want := fmt.Sprintf("INCQ %d(BX)", 8*(1+min(dx, ringlayout.HistBuckets-1)))
		got, than := "", -1
		for pc, steps := 0, 0; got == "" && pc < len(lines) && steps < len(lines); steps++ {
			in := strings.TrimSpace(lines[pc])
			pc++
			switch {
			case strings.HasPrefix(in, "CMPQ DX, $"):
				fmt.Sscanf(in, "CMPQ DX, $%d", &than)
			case strings.HasPrefix(in, "JCC "):
				if dx >= than {
					pc = labels[strings.TrimPrefix(in, "JCC ")]
				}
			case strings.HasPrefix(in, "INCQ "):
				got = in
				if next := strings.TrimSpace(lines[pc]); next != "RET" {
					t.Errorf("DX=%d: %q is followed by %q, not RET", dx, in, next)
				}
			}
		}
		if got != want {
			t.Errorf("DX=%d: reached %q, want %q", dx, got, want)
		}
	}
}
