package ring

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// selfSession opens a real session on this test's own process, whose
// ring is a buffer of bytes of the test's memory that the session reads
// and writes through /proc/self/mem, as it does a traced program's: one
// P's buffer of 4096 bytes when withBuffers, else only the control words
// and the semaphores' list.
func selfSession(tb testing.TB, withBuffers bool) (*Session, []byte) {
	tb.Helper()
	if withBuffers {
		return selfSessionOf(tb, 1)
	}
	return openSelf(tb, make([]byte, ringlayout.ListAt+8*1024), 1)
}

// selfSessionOf is selfSession with a buffer of 4096 bytes for each of
// ps Ps.
func selfSessionOf(tb testing.TB, ps int) (*Session, []byte) {
	tb.Helper()
	return openSelf(tb, make([]byte, ringlayout.BuffersAt+ps*4096), ps)
}

func openSelf(tb testing.TB, ctl []byte, ps int) (*Session, []byte) {
	tb.Helper()
	at := uint64(uintptr(unsafe.Pointer(&ctl[0])))
	s, err := Open(os.Getpid(), at, whereFor(at), ps, 4096)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(); sink = append(sink, ctl) })
	return s, ctl
}

// whereFor returns the address of Where words for a ring at ctl in this
// process, as a binary with a ring has them, which Open checks.
func whereFor(ctl uint64) uint64 {
	where := make([]byte, 16)
	binary.LittleEndian.PutUint64(where, ringlayout.WhereMagic)
	binary.LittleEndian.PutUint64(where[8:], ctl)
	sink = append(sink, where)
	return uint64(uintptr(unsafe.Pointer(&where[0])))
}

// FuzzTake hands Take and Deliver a P's buffer of any bytes, with any
// head and tail: what a damaged program, or one that writes over its
// ring, leaves for the tracer to read. Take returns records or an error
// that says the ring is damaged, never panics; every record it takes
// lies within what the head said was written, and Deliver hands on as
// many as Take placed, each with at most 15 words and a string only for a
// word the record marks as one.
//
// The seed corpus is records as the writers lay them out (parse_test's
// words and str, as TestParse has them): words, C strings, a value area.
func FuzzTake(f *testing.F) {
	const site = 0x4a1660 // a site with a value area of 16 bytes
	header := func(count int, strs uint64) uint64 {
		return site | uint64(count)<<ringlayout.CountShift | strs<<ringlayout.StringsShift
	}
	recs := [][]byte{
		words(header(0, 0)|8, 7, 100, 55),
		words(header(2, 0)|8, 7, 101, 55, 3, 4),
		append(words(header(2, 0b10)|8, 8, 102, 56|1<<ringlayout.AfterLossBit, 3, 0xc000), str("key31")...),
		append(words(header(1, 0), 7, 103, 55|1<<ringlayout.CallerTimeBit, 0xc000), words(5, 6)...),
		append(append(words(header(1, 1), 9, 104, 57, 0xc000), str("ab")...), words(5, 6)...),
	}
	var all []byte
	for _, r := range recs {
		f.Add(r, uint64(0), uint64(len(r)), uint64(0))
		all = append(all, r...)
	}
	f.Add(all, uint64(0), uint64(len(all)), uint64(0))
	// Wrapped around the buffer's end, with drops counted.
	wrapped := append(append(all[64:len(all):len(all)], make([]byte, 4096-len(all))...), all[:64]...)
	f.Add(wrapped, uint64(4096-64), uint64(4096-64+len(all)), uint64(3))
	f.Add(words(header(3, 0), 7, 100, 55, 1), uint64(0), uint64(40), uint64(0))

	s, ctl := selfSession(f, true)
	s.areas = map[uint64]int{site: 16}
	buf := ctl[ringlayout.BuffersAt:]
	f.Fuzz(func(t *testing.T, data []byte, tail, head, lost uint64) {
		clear(buf)
		copy(buf, data)
		hdr := ctl[ringlayout.HeadersAt:]
		binary.LittleEndian.PutUint64(hdr[ringlayout.HeadAt:], head)
		binary.LittleEndian.PutUint64(hdr[ringlayout.LostAt:], lost)
		s.tails[0], s.losses = tail, losses{}
		b, _, err := s.Take(true)
		if err != nil || b == nil {
			return
		}
		if s.tails[0]-tail > head-tail {
			t.Fatalf("Take moved the tail from %d to %d, past the head %d", tail, s.tails[0], head)
		}
		n := 0
		s.Deliver(b, func(r *Record) {
			n++
			if len(r.Words) > 15 || len(r.Strings) != len(r.Words) {
				t.Fatalf("a record of %d words and %d strings", len(r.Words), len(r.Strings))
			}
			for i, str := range r.Strings {
				if len(str) > len(buf) {
					t.Fatalf("string %d of %d bytes, from a buffer of %d", i, len(str), len(buf))
				}
			}
		})
		if n != len(b.recs) {
			t.Fatalf("Deliver handed on %d records of the %d Take placed", n, len(b.recs))
		}
	})
}
