package b

import (
	"fmt"
	"testing"
)

func TestFails(t *testing.T) {
	fmt.Println("printed by the test")
	t.Log("logged")
	t.Error("wrong")
}

func TestSkips(t *testing.T) { t.Skip("not here") }

func TestPasses(t *testing.T) {}
