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

// TestLiftLimit lifts trace's soft limit of the heap while tables are
// read, from the first read to the last of those that overlap, and then
// sets it again with the room the reads made; a limit that GOMEMLIMIT
// set, or none, stays as it is.
func TestLiftLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	const limit = 100 << 20
	t.Run("trace's limit", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "")
		debug.SetMemoryLimit(limit)
		setA, lifted := liftLimit()
		setB, _ := liftLimit() // another process's, with -exe
		if got := debug.SetMemoryLimit(-1); !lifted || got != math.MaxInt64 {
			t.Fatalf("while read: limit %d, lifted %v; want none, lifted", got, lifted)
		}
		limits.add(8 << 20) // the room A's tables made
		setA()
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("while B reads: limit %d, want none", got)
		}
		setB()
		if got := debug.SetMemoryLimit(-1); got != limit+8<<20 {
			t.Errorf("after: limit %d, want %d, with the room", got, limit+8<<20)
		}
		limits.add(-8 << 20)
		if got := debug.SetMemoryLimit(-1); got != limit {
			t.Errorf("the room taken back: limit %d, want %d", got, limit)
		}
	})
	for _, tc := range []struct {
		name  string
		limit int64
		env   string
	}{
		{"GOMEMLIMIT's", limit, "100MiB"},
		{"no limit", math.MaxInt64, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			debug.SetMemoryLimit(tc.limit)
			set, lifted := liftLimit()
			if got := debug.SetMemoryLimit(-1); lifted || got != tc.limit {
				t.Errorf("while read: limit %d, lifted %v; want %d as it was", got, lifted, tc.limit)
			}
			set()
			if got := debug.SetMemoryLimit(-1); got != tc.limit {
				t.Errorf("after: limit %d, want %d", got, tc.limit)
			}
		})
	}
}
