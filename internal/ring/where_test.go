package ring

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
	"unsafe"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// TestOpenChecksWhere opens sessions on this test's own memory, with
// Where words as a binary of this layout has them and as another
// executable's memory would: Open takes only the first, and writes
// nothing to the ring otherwise.
func TestOpenChecksWhere(t *testing.T) {
	ctl := make([]byte, ringlayout.ListAt+8*1024)
	at := uint64(uintptr(unsafe.Pointer(&ctl[0])))
	for _, tt := range []struct {
		name        string
		magic, addr uint64
		ok          bool
	}{
		{"this layout", ringlayout.WhereMagic, at, true},
		{"no address", ringlayout.WhereMagic, 0, true},
		{"older layout", whereMagic1, at, false},
		{"link-time address", ringlayout.WhereMagic, at - 4096, true},
		{"no ring", 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clear(ctl)
			where := make([]byte, 16)
			binary.LittleEndian.PutUint64(where, tt.magic)
			binary.LittleEndian.PutUint64(where[8:], tt.addr)
			s, err := Open(os.Getpid(), at, uint64(uintptr(unsafe.Pointer(&where[0]))), 1, 4096)
			sink = append(sink, where)
			if tt.ok {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if err := s.Same(); err != nil {
					t.Errorf("Same: %v", err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("Open took a ring whose Where words are not this executable's")
			}
			if !bytes.Equal(ctl, make([]byte, len(ctl))) {
				t.Errorf("Open wrote to a ring it refused: %v", err)
			}
		})
	}
}
