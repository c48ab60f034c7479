package a

import (
	"testing"
	"time"
)

func TestSlow(t *testing.T) { time.Sleep(300 * time.Millisecond) }

func TestFast(t *testing.T) {}

func TestSubtests(t *testing.T) {
	for _, name := range []string{"one", "two"} {
		t.Run(name, func(t *testing.T) { time.Sleep(20 * time.Millisecond) })
	}
}
