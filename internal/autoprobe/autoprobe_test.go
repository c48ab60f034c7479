package autoprobe

import "testing"

func TestName(t *testing.T) {
	tests := []struct{ kind, pkg, fn, want string }{
		{"entry", "main", "Shop.Order", "entry__main__Shop__Order"},
		{"exit", "json", "Marshal", "exit__json__Marshal"},
		// The link step's rename: an import path for the package, and the
		// fn part of a name it split.
		{"exit", "example.com/b/util", "Sep__Between", "exit__example_com_b_util__Sep__Between"},
		{"entry", "my-pkg", "Fé", "entry__my_pkg__F_"},
	}
	for _, tt := range tests {
		if got := Name(tt.kind, tt.pkg, tt.fn); got != tt.want {
			t.Errorf("Name(%q, %q, %q) = %q, want %q", tt.kind, tt.pkg, tt.fn, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name          string
		kind, pkg, fn string
		ok            bool
	}{
		{"entry__main__Shop__Order", "entry", "main", "Shop__Order", true},
		{"exit__json__Marshal", "exit", "json", "Marshal", true},
		{"job__done", "", "", "", false},
	}
	for _, tt := range tests {
		kind, pkg, fn, ok := Split(tt.name)
		if kind != tt.kind || pkg != tt.pkg || fn != tt.fn || ok != tt.ok {
			t.Errorf("Split(%q) = %q %q %q %v", tt.name, kind, pkg, fn, ok)
		}
	}
}

// TestLabel checks the Go names of methods against those
// runtime.FuncForPC gives the same methods: main.(*Cache).Get,
// main.List[...].Len, main.(*Map[...]).Size.
func TestLabel(t *testing.T) {
	for _, tt := range []struct{ pkg, fn, receiver, want string }{
		{"main", "f", "", "main.f"},
		{"main", "Cache__Get", "", "main.Cache.Get"},
		{"main", "Cache__Get", "*", "main.(*Cache).Get"},
		{"main", "List__Len", "[...]", "main.List[...].Len"},
		{"main", "Map__Size", "*[...]", "main.(*Map[...]).Size"},
		{"encoding_json", "Decoder__Decode", "*", "encoding_json.(*Decoder).Decode"},
	} {
		if got := Label(tt.pkg, tt.fn, tt.receiver); got != tt.want {
			t.Errorf("Label(%q, %q, %q) = %q, want %q", tt.pkg, tt.fn, tt.receiver, got, tt.want)
		}
	}
}

func TestTracedName(t *testing.T) {
	for _, tt := range []struct {
		name   string
		method bool
		n      int
		want   string
	}{
		{"Get", false, 0, "Get_usdtTraced"},
		{"get", true, 0, "get_usdtTraced"},
		// An exported method's copy is not exported.
		{"Get", true, 0, "get_usdtTraced"},
		{"Élan", true, 2, "élan_usdtTraced2"},
		{"Taken", false, 1, "Taken_usdtTraced1"},
	} {
		if got := TracedName(tt.name, tt.method, tt.n); got != tt.want {
			t.Errorf("TracedName(%q, %v, %d) = %q, want %q", tt.name, tt.method, tt.n, got, tt.want)
		}
	}
}

func TestTracedOf(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		ok         bool
	}{
		{"main.load_usdtTraced", "main.load_usdtTraced", true},
		{"main.(*Stats).inc_usdtTraced12", "main.(*Stats).inc_usdtTraced", true},
		{"main.load", "", false},
		{"main.load2", "", false},
		// Never a number TracedName gives.
		{"main.load_usdtTraced0", "", false},
		{"main.load_usdtTraced01", "", false},
	} {
		if got, ok := TracedOf(tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("TracedOf(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
