package probe

import (
	"reflect"
	"testing"
)

func TestParseUnreadable(t *testing.T) {
	tests := []struct {
		in   string
		addr uint64
		ok   bool
	}{
		{"<unreadable 0x7f8b3cc2a000>", 0x7f8b3cc2a000, true},
		{"<unreadable 0x0>", 0, true},
		{"<unreadable 0xffffffffffffffff>", 1<<64 - 1, true},
		{"<unreadable 0x1ffffffffffffffff>", 0, false}, // 17 digits
		{"<unreadable 0x>", 0, false},
		{"<unreadable 0x7F>", 0, false}, // the probes write lower case
		{"<unreadable 0x7f", 0, false},
		{"<unreadable 0x7f> ", 0, false},
		{"x<unreadable 0x7f>", 0, false},
		{"", 0, false},
		{"hello", 0, false},
	}
	for _, tt := range tests {
		addr, ok := ParseUnreadable(tt.in)
		if addr != tt.addr || ok != tt.ok {
			t.Errorf("ParseUnreadable(%q) = %#x, %v; want %#x, %v", tt.in, addr, ok, tt.addr, tt.ok)
		}
	}
}

// TestEscaped checks which of a probe's strings Escaped passes through
// its escape (those shown), which it keeps (those read: layouts, the
// spec, the linker's function name), and that the probe it was called
// on keeps its arguments.
func TestEscaped(t *testing.T) {
	mark := func(s string) string { return "<" + s + ">" }
	p := Probe{
		Provider: "go", Name: "entry__main__f", Package: "example.com/m", Receiver: "*",
		Spec: "-8@%r13 8@%rbx", Func: "main.f", PC: 0x401000,
		Args:    []Arg{{Name: "goid", Type: "int64", Kind: Int64}, {Name: "c", Type: "*Cache", Kind: Pointer, Layout: `{"k":"ptr"}`}},
		Dropped: []Arg{{Name: "a12", Type: "int"}},
	}
	want := Probe{
		Provider: "<go>", Name: "<entry__main__f>", Package: "<example.com/m>", Receiver: "<*>",
		Spec: "-8@%r13 8@%rbx", Func: "main.f", PC: 0x401000,
		Args:    []Arg{{Name: "<goid>", Type: "<int64>", Kind: Int64}, {Name: "<c>", Type: "<*Cache>", Kind: Pointer, Layout: `{"k":"ptr"}`}},
		Dropped: []Arg{{Name: "<a12>", Type: "<int>"}},
	}
	orig := p
	orig.Args, orig.Dropped = append([]Arg(nil), p.Args...), append([]Arg(nil), p.Dropped...)
	if got := p.Escaped(mark); !reflect.DeepEqual(got, want) {
		t.Errorf("Escaped = %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(p, orig) {
		t.Errorf("Escaped changed the probe it was called on: %+v", p)
	}
	if got := (Probe{}).Escaped(mark); got.Args != nil || got.Dropped != nil {
		t.Errorf("Escaped gave a probe without arguments %+v", got)
	}
}
