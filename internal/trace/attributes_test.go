package trace

import (
	"reflect"
	"testing"
)

func TestShowPanics(t *testing.T) {
	tests := []struct {
		name string
		in   []Value
		want []Value
	}{
		{
			name: "none panicked",
			in:   []Value{{Name: "o", Text: "&{}"}, {Name: "order.id", Data: int64(3), Text: "3"}, {Name: PanicKey, Data: "", Text: `""`}},
			want: []Value{{Name: "o", Text: "&{}"}, {Name: "order.id", Data: int64(3), Text: "3"}},
		},
		{
			name: "one of two",
			in: []Value{
				{Name: "order.customer", Data: "", Text: `""`},
				{Name: "order.id", Data: int64(3), Text: "3"},
				{Name: PanicKey, Data: "order.customer: runtime error: invalid memory address or nil pointer dereference\n"},
			},
			want: []Value{
				{Name: "order.customer", Data: "<panic: runtime error: invalid memory address or nil pointer dereference>", Text: "<panic: runtime error: invalid memory address or nil pointer dereference>"},
				{Name: "order.id", Data: int64(3), Text: "3"},
			},
		},
		{
			name: "a message of control bytes",
			in:   []Value{{Name: "a.b", Data: "x", Text: `"x"`}, {Name: PanicKey, Data: "a.b: bad\x1b[2J\nnot a key line\n"}},
			// -json's encoder escapes the control bytes of Data.
			want: []Value{{Name: "a.b", Data: "<panic: bad\x1b[2J>", Text: "<panic: bad\\x1b[2J>"}},
		},
		{
			name: "no attributes",
			in:   []Value{{Name: "n", Data: int64(1), Text: "1"}},
			want: []Value{{Name: "n", Data: int64(1), Text: "1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := showPanics(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("showPanics:\ngot  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
