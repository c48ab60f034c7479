package ring

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// TestSumCounters sums the counters of several Ps read through buffers
// of every size, a counter or more, against the sums made one counter
// at a time.
func TestSumCounters(t *testing.T) {
	const base, size, slots, n = 0x1000, 8*7 + 16, 3, 7 // padding after each P's counters
	mem := make([]byte, base+slots*size)
	want := make([]uint64, n)
	for p := range slots {
		for i := range n {
			v := uint64(1000*p + i + 1)
			binary.LittleEndian.PutUint64(mem[base+p*size+8*i:], v)
			want[i] += v
		}
	}
	read := func(addr uint64, b []byte) error {
		if addr < base || addr+uint64(len(b)) > uint64(len(mem)) {
			return errors.New("out of the counters")
		}
		copy(b, mem[addr:])
		return nil
	}
	for _, buf := range []int{8, 16, 24, 40, 8 * n, 8*n + 8, 1024} {
		got := make([]uint64, n)
		if err := sumCounters(read, base, size, slots, make([]byte, buf), got); err != nil {
			t.Fatalf("buffer of %d bytes: %v", buf, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("buffer of %d bytes: %v, want %v", buf, got, want)
		}
	}
	fail := errors.New("gone")
	if err := sumCounters(func(uint64, []byte) error { return fail }, base, size, slots, make([]byte, 16), make([]uint64, n)); !errors.Is(err, fail) {
		t.Errorf("a failed read: %v", err)
	}
}
