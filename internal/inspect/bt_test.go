package inspect

import (
	"strings"
	"testing"
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
