package trace

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestRoomForTables raises the heap's soft limit by what the heap grew
// while tables were read, and takes it back after; a limit that
// GOMEMLIMIT set, or none, stays as it is.
func TestRoomForTables(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	t.Setenv("GOMEMLIMIT", "")
	const limit = 100 << 20
	var tables [][]byte
	for _, tc := range []struct {
		name   string
		limit  int64
		env    string
		raised bool
	}{
		{"trace's limit", limit, "", true},
		{"GOMEMLIMIT's", limit, "100MiB", false},
		{"no limit", math.MaxInt64, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			debug.SetMemoryLimit(tc.limit)
			// The heap's growth is what the limit rises by: a
			// collection of the earlier tests' garbage while the
			// tables are made shrank it by 250 KB once in 30 runs.
			// Collected first, and a MiB of slack for what the
			// runtime frees meanwhile.
			runtime.GC()
			before := heapObjects()
			tables = append(tables, make([]byte, 32<<20)) // the tables, read
			release := roomForTables(before)
			got := debug.SetMemoryLimit(-1)
			switch {
			case tc.raised && got < tc.limit+31<<20:
				t.Errorf("limit %d after 32 MiB of tables, want at least %d", got, tc.limit+31<<20)
			case !tc.raised && got != tc.limit:
				t.Errorf("limit %d, want %d as it was", got, tc.limit)
			}
			release()
			if got := debug.SetMemoryLimit(-1); got != tc.limit {
				t.Errorf("limit %d after release, want %d", got, tc.limit)
			}
		})
	}
	runtime.KeepAlive(tables)
}
