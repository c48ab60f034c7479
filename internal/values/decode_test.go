package values

import (
	"math"
	"testing"

	"github.com/go-usdt/usdt/internal/layout"
)

// TestDecodeOddLayouts: a layout read from a type descriptor at the
// address an interface's changing memory gave, or from a damaged probe
// table, can say anything. Its values decode as unknown ("?") or unread
// ("..."), never a panic. FuzzRecord in internal/trace found each.
func TestDecodeOddLayouts(t *testing.T) {
	field := func(off int64, ft *layout.Type) *layout.Type {
		return &layout.Type{Kind: layout.Struct, Size: off + 8, Fields: []layout.Field{{Name: "a", Offset: off, Type: ft}}}
	}
	tests := []struct {
		name string
		l    *layout.Type
		want string
	}{
		{"bool of no bytes", field(0, &layout.Type{Kind: layout.Bool}), "{a:?}"},
		{"int of 16 bytes", &layout.Type{Kind: layout.Int, Size: 16}, "?"},
		{"uint of 3 bytes", &layout.Type{Kind: layout.Uint, Size: 3}, "?"},
		{"float of 2 bytes", &layout.Type{Kind: layout.Float, Size: 2}, "?"},
		{"size past the area", field(8, &layout.Type{Kind: layout.String, Size: math.MaxInt64}), "{a:...}"},
		{"field without a type", field(0, nil), "{a:?}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlan([]*layout.Type{tt.l}, SlotGroups)
			v, ok := p.Decode(0, tt.l, 0xc000010000, make([]byte, AreaSize+OpMax), nil)
			if !ok {
				t.Fatal("the plan reads nothing of the argument")
			}
			if got := v.String(); got != tt.want {
				t.Errorf("%s, want %s", got, tt.want)
			}
		})
	}
}
