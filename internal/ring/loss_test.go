package ring

import "testing"

// TestLosses follows records through spans of drops: every record within
// a span follows a loss, and so does each goroutine's first after it; a
// P's mark makes every goroutine's next record follow one.
func TestLosses(t *testing.T) {
	type rec struct {
		g      uint64
		t      int64
		marked bool
		want   bool
	}
	tests := []struct {
		name  string
		spans []lossSpan
		recs  []rec
	}{
		{"no drop", nil, []rec{{1, 5, false, false}, {2, 6, false, false}}},
		{"before, within and after a span", []lossSpan{{10, 20}}, []rec{
			{1, 9, false, false},
			{1, 12, false, true},
			// g 1 wrote on one P while another dropped: its events
			// between 12 and 15 may have gone too.
			{1, 15, false, true},
			{1, 25, false, true},
			{1, 26, false, false},
			{2, 27, false, true},
			{2, 28, false, false},
		}},
		{"spans that overlap are one", []lossSpan{{10, 20}, {18, 30}}, []rec{
			{1, 25, false, true},
			{1, 29, false, true},
			{1, 31, false, true},
			{1, 32, false, false},
		}},
		{"a later span marks again", []lossSpan{{10, 20}, {40, 50}}, []rec{
			{1, 25, false, true},
			{1, 35, false, false},
			{1, 45, false, true},
			{1, 55, false, true},
			{1, 56, false, false},
		}},
		{"a P's mark", nil, []rec{
			{1, 5, false, false},
			{1, 6, true, true},
			{2, 7, false, true},
			{1, 8, false, false},
			{2, 9, false, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l losses
			for _, s := range tt.spans {
				l.add(s)
			}
			for _, r := range tt.recs {
				if got := l.after(r.g, r.t, r.marked); got != r.want {
					t.Errorf("goroutine %d at %d (marked %v): after a loss %v, want %v", r.g, r.t, r.marked, got, r.want)
				}
			}
		})
	}
}
