package runtime

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// withRegistry runs f against an empty registry and restores the previous
// contents afterwards, so tests do not see each other's probes.
func withRegistry(t testing.TB, f func()) {
	t.Helper()
	registry.mu.Lock()
	saved := registry.probes
	registry.probes = nil
	registry.mu.Unlock()
	defer func() {
		registry.mu.Lock()
		registry.probes = saved
		registry.mu.Unlock()
	}()
	f()
}

func sem(v uint16) *uint16 { return &v }

func TestProbes(t *testing.T) {
	tests := []struct {
		name  string
		calls [][]Probe
		want  []ProbeState
	}{
		{"empty", nil, []ProbeState{}},
		{"empty call", [][]Probe{{}, nil}, []ProbeState{}},
		{
			"one",
			[][]Probe{{{"app", "start", "(pid int64)", sem(0)}}},
			[]ProbeState{{"app", "start", "(pid int64)", false}},
		},
		{
			"enabled and nil semaphore",
			[][]Probe{{
				{"app", "a", "()", sem(1)},
				{"app", "b", "()", sem(0xffff)},
				{"app", "c", "()", nil},
			}},
			[]ProbeState{
				{"app", "a", "()", true},
				{"app", "b", "()", true},
				{"app", "c", "()", false},
			},
		},
		{
			"sorted by provider then name",
			[][]Probe{
				{{"zeta", "b", "", nil}, {"alpha", "z", "", nil}},
				{{"alpha", "a", "", nil}, {"zeta", "a", "", nil}},
			},
			[]ProbeState{
				{"alpha", "a", "", false},
				{"alpha", "z", "", false},
				{"zeta", "a", "", false},
				{"zeta", "b", "", false},
			},
		},
		{
			// Provider sorts before name even when the concatenations
			// would order differently.
			"provider is the primary key",
			[][]Probe{{{"ab", "a", "", nil}, {"a", "zz", "", nil}}},
			[]ProbeState{{"a", "zz", "", false}, {"ab", "a", "", false}},
		},
		{
			"duplicates keep registration order",
			[][]Probe{
				{{"app", "dup", "(first int64)", nil}, {"app", "x", "", nil}},
				{{"app", "dup", "(second int64)", sem(1)}},
				{{"app", "dup", "(third int64)", nil}},
			},
			[]ProbeState{
				{"app", "dup", "(first int64)", false},
				{"app", "dup", "(second int64)", true},
				{"app", "dup", "(third int64)", false},
				{"app", "x", "", false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withRegistry(t, func() {
				for _, c := range tt.calls {
					Register(c)
				}
				if got := Probes(); !slices.Equal(got, tt.want) {
					t.Errorf("Probes() =\n%v\nwant\n%v", got, tt.want)
				}
			})
		})
	}
}

func TestProbesSnapshot(t *testing.T) {
	withRegistry(t, func() {
		s := new(uint16)
		probes := []Probe{{"app", "p", "()", s}}
		Register(probes)
		// Register copies: later changes to the caller's slice do not
		// leak in.
		probes[0].Name = "changed"

		if got := Probes(); got[0].Enabled || got[0].Name != "p" {
			t.Fatalf("Probes() = %v, want p disabled", got)
		}
		*s = 1 // a tracer attaches
		if got := Probes(); !got[0].Enabled {
			t.Errorf("Probes() = %v after the semaphore was set, want enabled", got)
		}
		*s = 0
		if got := Probes(); got[0].Enabled {
			t.Errorf("Probes() = %v after the semaphore was cleared, want disabled", got)
		}
	})
}

func TestRegisterConcurrent(t *testing.T) {
	withRegistry(t, func() {
		const (
			packages = 16
			perPkg   = 50
		)
		var wg sync.WaitGroup
		for p := range packages {
			provider := "pkg" + strconv.Itoa(p)
			probes := make([]Probe, perPkg)
			for i := range probes {
				// All probes of a package share a name, so only
				// registration order tells them apart after sorting.
				probes[i] = Probe{provider, "probe", strconv.Itoa(i), sem(uint16(i % 2))}
			}
			wg.Go(func() { Register(probes) })
			// Readers run alongside the writers, as a debug handler
			// could during init of a lazily loaded plugin.
			wg.Go(func() { _ = Probes() })
			wg.Go(func() { _ = WriteText(&strings.Builder{}) })
		}
		wg.Wait()

		got := Probes()
		if len(got) != packages*perPkg {
			t.Fatalf("got %d probes, want %d", len(got), packages*perPkg)
		}
		for p := range packages {
			provider := "pkg" + strconv.Itoa(p)
			var args []string
			for _, s := range got {
				if s.Provider == provider {
					args = append(args, s.Args)
					if want := s.Args[len(s.Args)-1]%2 == 1; s.Enabled != want {
						t.Errorf("%s %s: Enabled = %v, want %v", provider, s.Args, s.Enabled, want)
					}
				}
			}
			for i, a := range args {
				if a != strconv.Itoa(i) {
					t.Fatalf("%s: order %v, want registration order", provider, args)
				}
			}
		}
		if !slices.IsSortedFunc(got, func(a, b ProbeState) int {
			return strings.Compare(a.Provider, b.Provider)
		}) {
			t.Errorf("Probes() not sorted by provider")
		}
	})
}

func TestWriteText(t *testing.T) {
	tests := []struct {
		name  string
		probe []Probe
		want  string
	}{
		{
			"empty",
			nil,
			"PROVIDER  NAME  ARGS  ENABLED\n",
		},
		{
			"aligned",
			[]Probe{
				{"myapp", "request_start", "(id int64, path string)", sem(1)},
				{"db", "query", "(sql string)", sem(0)},
				{"myapp", "gc", "()", nil},
			},
			"" +
				"PROVIDER  NAME           ARGS                     ENABLED\n" +
				"db        query          (sql string)             no\n" +
				"myapp     gc             ()                       no\n" +
				"myapp     request_start  (id int64, path string)  yes\n",
		},
		{
			"non-ASCII aligns by rune",
			[]Probe{
				{"app", "é", "(s string)", nil},
				{"app", "ee", "()", nil},
			},
			"" +
				"PROVIDER  NAME  ARGS        ENABLED\n" +
				"app       ee    ()          no\n" +
				"app       é     (s string)  no\n",
		},
		{
			"control characters cannot break rows",
			[]Probe{{"app", "p", "(a int,\n\tb int)", nil}},
			"" +
				"PROVIDER  NAME  ARGS             ENABLED\n" +
				"app       p     (a int,  b int)  no\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withRegistry(t, func() {
				Register(tt.probe)
				var b strings.Builder
				if err := WriteText(&b); err != nil {
					t.Fatal(err)
				}
				if got := b.String(); got != tt.want {
					t.Errorf("WriteText wrote\n%s\nwant\n%s", got, tt.want)
				}
			})
		})
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestWriteTextError(t *testing.T) {
	want := errors.New("broken pipe")
	if err := WriteText(failingWriter{want}); !errors.Is(err, want) {
		t.Errorf("WriteText = %v, want %v", err, want)
	}
}

func BenchmarkRegister(b *testing.B) {
	probes := make([]Probe, 10)
	withRegistry(b, func() {
		for b.Loop() {
			registry.mu.Lock()
			registry.probes = registry.probes[:0]
			registry.mu.Unlock()
			Register(probes)
		}
	})
}
