package c

import "testing"

func TestPasses(t *testing.T) { t.Log("not shown") }

func TestPanics(t *testing.T) { panic("boom") }
