package main

import "testing"

// TestFire exists so that `go test -c` yields a test binary with probes.
func TestFire(t *testing.T) {
	fire()
	if TypesTickEnabled() {
		t.Log("a tracer is attached")
	}
}
