package toolexec

import (
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

func TestDisambiguate(t *testing.T) {
	site := func(pkg, name string) probe.Probe {
		return probe.Probe{Package: pkg, Provider: "go", Name: name}
	}
	sites := []probe.Probe{
		site("example.com/a/util", "entry__util__Join"),
		site("example.com/b/util", "entry__util__Join"),
		site("example.com/b/util", "exit__util__Sep__Between"),
		site("example.com/other", "entry__other__Run"),
		// usdtgen tables carry no package and are never renamed.
		site("", "job__done"),
	}
	disambiguate(sites)
	want := []string{
		"entry__example_com_a_util__Join",
		"entry__example_com_b_util__Join",
		"exit__example_com_b_util__Sep__Between",
		"entry__other__Run",
		"job__done",
	}
	for i, s := range sites {
		if s.Name != want[i] {
			t.Errorf("site %d: %q, want %q", i, s.Name, want[i])
		}
	}
}

// TestShareSemaphores: a note on a function as compiled (Func set, no
// semaphore) takes the semaphore of its copy's probe of the same
// package, provider and name; no other note takes one.
func TestShareSemaphores(t *testing.T) {
	code := func(pkg, name string, sem uint64) probe.Probe {
		return probe.Probe{Package: pkg, Provider: "p", Name: name, Semaphore: sem}
	}
	note := func(pkg, name string) probe.Probe {
		return probe.Probe{Package: pkg, Provider: "p", Name: name, Func: pkg + ".F"}
	}
	sites := []probe.Probe{
		note("a", "entry__a__F"), // its copy's, below
		code("a", "entry__a__F", 0x100),
		note("b", "entry__a__F"),    // another package's name: none
		note("a", "exit__a__F"),     // no copy: none
		code("a", "entry__a__G", 0), // a copy without a semaphore
		note("a", "entry__a__G"),
	}
	shareSemaphores(sites)
	want := []uint64{0x100, 0x100, 0, 0, 0, 0}
	for i, s := range sites {
		if s.Semaphore != want[i] {
			t.Errorf("site %d (%s %s %q): semaphore %#x, want %#x", i, s.Package, s.Name, s.Func, s.Semaphore, want[i])
		}
	}
}
