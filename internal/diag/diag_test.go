package diag

import (
	"errors"
	"fmt"
	"testing"
)

func TestPosString(t *testing.T) {
	tests := []struct {
		pos  Pos
		want string
	}{
		{Pos{"a.d", 3, 7}, "a.d:3:7"},
		{Pos{"a.yml", 3, 0}, "a.yml:3"},
		{Pos{"", 3, 7}, "3:7"},
		{Pos{"a.d", 0, 0}, "a.d"},
		{Pos{}, "-"},
	}
	for _, tt := range tests {
		if got := tt.pos.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.pos, got, tt.want)
		}
	}
}

func TestFinish(t *testing.T) {
	if ErrorList(nil).Finish() != nil {
		t.Error("Finish of no errors is not nil")
	}
	l := ErrorList{
		{Pos: Pos{"f", 2, 1}, Msg: "b"},
		{Pos: Pos{"f", 1, 5}, Msg: "a"},
		{Pos: Pos{"f", 2, 1}, Msg: "b"},
	}.Finish()
	if want := "f:1:5: a\nf:2:1: b"; l.Error() != want {
		t.Errorf("Finish = %q, want %q", l.Error(), want)
	}
	var many ErrorList
	for i := range 15 {
		many = append(many, &Error{Pos: Pos{"f", i + 1, 1}, Msg: fmt.Sprint(i)})
	}
	many = many.Finish()
	if len(many) != MaxErrors+1 || many[MaxErrors].Msg != "too many errors" {
		t.Errorf("capped list has %d entries, last %q", len(many), many[len(many)-1].Msg)
	}
	var e *Error
	if !errors.As(error(many), &e) || e.Msg != "0" {
		t.Errorf("errors.As found %v", e)
	}
	hinted := &Error{Pos: Pos{"f", 1, 1}, Msg: "m", Hint: "h"}
	if hinted.Error() != "f:1:1: m\n\thint: h" {
		t.Errorf("hinted error %q", hinted.Error())
	}
}
