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
