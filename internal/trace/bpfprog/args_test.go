package bpfprog

import (
	"reflect"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		arch, args string
		want       []Arg
	}{
		{"amd64", "", nil},
		{"amd64", "-8@%rdi 8@%rsi -4@%edx", []Arg{
			{RegOff: 112, Size: 8, Signed: true}, {RegOff: 104, Size: 8}, {RegOff: 96, Size: 4, Signed: true}}},
		{"amd64", "-8@16(%rsp) 1@40(%rsp) 2@-8(%rbp)", []Arg{
			{Deref: true, RegOff: 152, Disp: 16, Size: 8, Signed: true},
			{Deref: true, RegOff: 152, Disp: 40, Size: 1},
			{Deref: true, RegOff: 32, Disp: -8, Size: 2}}},
		{"amd64", "8@(%rax)", []Arg{{Deref: true, RegOff: 80, Size: 8}}},
		{"amd64", "-8@152(%r14) 8@$0 -4@$-9", []Arg{
			{Deref: true, RegOff: 8, Disp: 152, Size: 8, Signed: true},
			{Const: true, Size: 8}, {Const: true, Disp: -9, Size: 4, Signed: true}}},
		{"arm64", "-8@[x28, 152] 8@0 4@7", []Arg{
			{Deref: true, RegOff: 224, Disp: 152, Size: 8, Signed: true},
			{Const: true, Size: 8}, {Const: true, Disp: 7, Size: 4}}},
		{"arm64", "-4@x0 8@x30 8@sp", []Arg{
			{Size: 4, Signed: true}, {RegOff: 240, Size: 8}, {RegOff: 248, Size: 8}}},
		{"arm64", "-8@[sp, 16] 1@[x29]", []Arg{
			{Deref: true, RegOff: 248, Disp: 16, Size: 8, Signed: true},
			{Deref: true, RegOff: 232, Size: 1}}},
	}
	for _, tt := range tests {
		got, err := ParseArgs(tt.arch, tt.args)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseArgs(%s, %q) = %+v, %v; want %+v", tt.arch, tt.args, got, err, tt.want)
		}
	}
}

func TestParseArgsRejects(t *testing.T) {
	for _, tt := range []struct{ arch, args string }{
		{"amd64", "8"},
		{"amd64", "3@%rax"},
		{"amd64", "16@%rax"},
		{"amd64", "8@%xmm0"},
		{"amd64", "8@$x"},
		{"amd64", "8@5"},
		{"arm64", "8@$5"},
		{"arm64", "8@-x"},
		{"amd64", "8@x(%rsp)"},
		{"arm64", "8@[sp, 16"},
		{"arm64", "8@q0"},
		{"riscv64", "8@a0"},
	} {
		if got, err := ParseArgs(tt.arch, tt.args); err == nil {
			t.Errorf("ParseArgs(%s, %q) = %+v, want an error", tt.arch, tt.args, got)
		}
	}
}
