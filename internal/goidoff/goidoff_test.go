package goidoff

import (
	"os/exec"
	"strings"
	"testing"
)

func goroot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func TestOffsetArm64(t *testing.T) {
	off, err := Offset(goroot(t), "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if off <= 0 || off%8 != 0 {
		t.Errorf("arm64 offset %d", off)
	}
}
