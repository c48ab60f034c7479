package asmgen

import (
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

func TestGoArgs(t *testing.T) {
	tests := []struct {
		name  string
		arch  Arch
		kinds []probe.Kind
		specs string
		size  int
	}{
		{"none", AMD64, nil, "", 0},
		{"int64 and string", AMD64, []probe.Kind{probe.Int64, probe.String}, "-8@8(%rsp) 8@16(%rsp)", 16},
		// Narrow arguments pack like struct fields, each aligned to its size.
		{"packed", AMD64, []probe.Kind{probe.Int8, probe.Uint8, probe.Int16, probe.Uint16, probe.Int32, probe.Uint32},
			"-1@8(%rsp) 1@9(%rsp) -2@10(%rsp) 2@12(%rsp) -4@16(%rsp) 4@20(%rsp)", 16},
		{"realigned", AMD64, []probe.Kind{probe.Bool, probe.Int64, probe.Bool}, "1@8(%rsp) -8@16(%rsp) 1@24(%rsp)", 17},
		{"arm64", ARM64, []probe.Kind{probe.Int32, probe.Pointer}, "-4@[sp, 8] 8@[sp, 16]", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := GoArgs(tt.arch, tt.kinds)
			if specs := strings.Join(f.Specs, " "); specs != tt.specs || f.Size != tt.size {
				t.Errorf("GoArgs = %q size %d, want %q size %d", specs, f.Size, tt.specs, tt.size)
			}
		})
	}
}

func TestCArgs(t *testing.T) {
	eight := []probe.Kind{probe.Int8, probe.Uint16, probe.Int32, probe.Uint64, probe.Bool, probe.String, probe.Int64, probe.Pointer}
	tests := []struct {
		name  string
		arch  Arch
		kinds []probe.Kind
		want  string
	}{
		{"amd64 registers then stack", AMD64, eight, "-1@%rdi 2@%rsi -4@%rdx 8@%rcx 1@%r8 8@%r9 -8@8(%rsp) 8@16(%rsp)"},
		{"arm64 registers", ARM64, eight, "-1@x0 2@x1 -4@x2 8@x3 1@x4 8@x5 -8@x6 8@x7"},
		{"arm64 stack", ARM64, append(eight, probe.Int32, probe.Uint8), "-1@x0 2@x1 -4@x2 8@x3 1@x4 8@x5 -8@x6 8@x7 -4@[sp, 0] 1@[sp, 8]"},
	}
	for _, tt := range tests {
		if got := CArgs(tt.arch, tt.kinds); got != tt.want {
			t.Errorf("%s: CArgs = %q, want %q", tt.name, got, tt.want)
		}
	}
}
