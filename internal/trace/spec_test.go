package trace

import (
	"reflect"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		arch, args string
		want       []argSpec
	}{
		{"amd64", "", nil},
		{"amd64", "-8@%rdi 8@%rsi -4@%edx", []argSpec{
			{regOff: 112, size: 8, signed: true}, {regOff: 104, size: 8}, {regOff: 96, size: 4, signed: true}}},
		{"amd64", "-8@16(%rsp) 1@40(%rsp) 2@-8(%rbp)", []argSpec{
			{deref: true, regOff: 152, disp: 16, size: 8, signed: true},
			{deref: true, regOff: 152, disp: 40, size: 1},
			{deref: true, regOff: 32, disp: -8, size: 2}}},
		{"amd64", "8@(%rax)", []argSpec{{deref: true, regOff: 80, size: 8}}},
		{"arm64", "-4@x0 8@x30 8@sp", []argSpec{
			{size: 4, signed: true}, {regOff: 240, size: 8}, {regOff: 248, size: 8}}},
		{"arm64", "-8@[sp, 16] 1@[x29]", []argSpec{
			{deref: true, regOff: 248, disp: 16, size: 8, signed: true},
			{deref: true, regOff: 232, size: 1}}},
	}
	for _, tt := range tests {
		got, err := parseArgs(tt.arch, tt.args)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseArgs(%s, %q) = %+v, %v; want %+v", tt.arch, tt.args, got, err, tt.want)
		}
	}
}

func TestParseArgsRejects(t *testing.T) {
	for _, tt := range []struct{ arch, args string }{
		{"amd64", "8"},
		{"amd64", "3@%rax"},
		{"amd64", "16@%rax"},
		{"amd64", "8@%xmm0"},
		{"amd64", "8@$5"},
		{"amd64", "8@x(%rsp)"},
		{"arm64", "8@[sp, 16"},
		{"arm64", "8@q0"},
		{"riscv64", "8@a0"},
	} {
		if got, err := parseArgs(tt.arch, tt.args); err == nil {
			t.Errorf("parseArgs(%s, %q) = %+v, want an error", tt.arch, tt.args, got)
		}
	}
}
