package trace

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestLineWriter: writers that share a lock write whole lines, however
// their writes cut them, and Flush writes the rest.
func TestLineWriter(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &lineWriter{mu: &mu, w: &out}
			line := strings.Repeat(string(rune('a'+w)), 50) + "\n"
			for range 200 {
				l.Write([]byte(line[:17]))
				l.Write([]byte(line[17:]))
			}
			l.Write([]byte("tail"))
			l.Flush()
		}()
	}
	wg.Wait()
	text := out.String()
	if n := strings.Count(text, "tail"); n != 4 {
		t.Errorf("%d tails, want 4", n)
	}
	for _, l := range strings.Split(strings.ReplaceAll(text, "tail", ""), "\n") {
		if l != "" && (len(l) != 50 || strings.Count(l, l[:1]) != 50) {
			t.Fatalf("a torn line: %q", l)
		}
	}
}
