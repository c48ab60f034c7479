package probetable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

// link does what the linker does to an image: fills in stub addresses,
// probe i's stub being at stubAt(i). It appends bytes that follow the table
// in the section.
func link(img Image) []byte {
	b := append([]byte(nil), img.Bytes...)
	for i := range img.Layout.Stubs() {
		binary.LittleEndian.PutUint64(b[img.Layout.StubsOffset+8*i:], stubAt(i))
	}
	return append(b, 0xff, 0xff) // whatever follows in the section
}

func stubAt(i int) uint64 { return 0x401000 + SiteSize*uint64(i) }

// entry is a probe as a code generator hands it to Build, its arguments
// of kinds ks and unnamed.
func entry(provider, name, spec string, slot int, ks ...probe.Kind) probe.Probe {
	p := probe.Probe{Provider: provider, Name: name, Spec: spec, Slot: slot}
	for _, k := range ks {
		p.Args = append(p.Args, probe.Arg{Kind: k})
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		entries []probe.Probe
		slots   int // semaphore slots, unrounded
	}{
		{"empty", nil, 0},
		{"one", []probe.Probe{entry("shop", "order__placed", "-8@8(%rsp) 8@16(%rsp)", 0, probe.Int64, probe.String)}, 1},
		{"no args", []probe.Probe{entry("p", "a", "", 0), entry("p", "b", "", 1)}, 2},
		{"five", []probe.Probe{entry("a", "b", "1@8(%rsp)", 0, probe.Bool), entry("a", "c", "", 1), entry("a", "d", "8@8(%rsp)", 2), entry("x", "y", "-2@8(%rsp)", 3, probe.Int16), entry("x", "z", "", 4)}, 5},
		{"shared", []probe.Probe{entry("go", "entry__f", "-8@8(%rsp)", 0), entry("go", "exit__f", "-8@8(%rsp)", 0), entry("go", "entry__g", "", 1)}, 2},
		{"exit first", []probe.Probe{entry("go", "exit__f", "", 1), entry("go", "entry__f", "", 1)}, 2},
		{"sparse", []probe.Probe{entry("p", "a", "", 6)}, 7},
		{"names", []probe.Probe{{
			Provider: "go", Name: "entry__main__Cache__Get", Spec: "-8@8(%rsp) 8@16(%rsp) 8@24(%rsp) -8@32(%rsp)",
			Args:    []probe.Arg{{Name: "goid", Type: "int64", Kind: probe.Int64}, {Name: "c", Type: "*Cache", Kind: probe.Pointer}, {Name: "key", Type: "string", Kind: probe.String}, {Name: "_", Type: "int", Kind: probe.Int64}},
			Dropped: []probe.Arg{{Name: "", Type: "map[string]struct{a, b int}", Kind: probe.Invalid}},
		}}, 1},
		{"layouts", []probe.Probe{{
			Provider: "go", Name: "entry__main__Place", Spec: "-8@%r13 8@%rbx",
			Args:    []probe.Arg{{Name: "goid", Type: "int64", Kind: probe.Int64}, {Name: "o", Type: "Order", Kind: probe.Pointer, Layout: `{"k":"struct","s":8}`}},
			Dropped: []probe.Arg{{Name: "a", Type: "*Addr", Layout: `{"k":"ptr","s":8}`}},
		}}, 1},
		{"receivers", []probe.Probe{
			{Provider: "go", Name: "entry__main__Cache__Get", Receiver: "*"},
			{Provider: "go", Name: "entry__main__f"},
			{Provider: "go", Name: "exit__main__List__Len", Receiver: "[...]"},
		}, 1},
	}
	// Enough probes, like a package with every function instrumented,
	// that their strings deflate (version 5).
	var many []probe.Probe
	for i := range 200 {
		for _, kind := range []string{"entry", "exit"} {
			many = append(many, probe.Probe{
				Provider: "go", Name: fmt.Sprintf("%s__pkg__F%d", kind, i), Spec: "-8@152(%r14) 8@16(%rsp)", Slot: i,
				Args: []probe.Arg{{Name: "goid", Type: "int64", Kind: probe.Int64}, {Name: fmt.Sprint("x", i%7), Type: "*T", Kind: probe.Pointer}},
			})
		}
	}
	// A pool past 64 KiB, as layouts make for a package like net/http:
	// references into it are larger than what follows the pool.
	var laidOut []probe.Probe
	for i := range 300 {
		laidOut = append(laidOut, probe.Probe{
			Provider: "go", Name: fmt.Sprintf("entry__pkg__F%d", i), Spec: "-8@152(%r14) 8@%rbx", Slot: i,
			Args: []probe.Arg{{Name: "goid", Type: "int64", Kind: probe.Int64}, {Name: "r", Type: fmt.Sprint("T", i), Kind: probe.Pointer,
				Layout: fmt.Sprintf(`{"k":"struct","s":%d,"f":[%s]}`, i, strings.Repeat(fmt.Sprintf(`{"n":"F%d","t":{"k":"int","s":8}},`, i), 20))}},
		})
	}
	tests = append(tests, []struct {
		name    string
		entries []probe.Probe
		slots   int
	}{{"many", many, 200}, {"large pool", laidOut, 300}}...)
	for _, tt := range tests {
		for _, backToBack := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/backToBack=%v", tt.name, backToBack), func(t *testing.T) {
				testRoundTrip(t, tt.entries, tt.slots, backToBack)
			})
		}
	}
}

func testRoundTrip(t *testing.T, entries []probe.Probe, slots int, backToBack bool) {
	img, err := Build("example.com/pkg", entries, backToBack)
	if err != nil {
		t.Fatal(err)
	}
	l := img.Layout
	stubs := len(entries)
	if backToBack {
		stubs = min(stubs, 1)
	}
	v := img.Bytes[len(Magic)-1]
	hasLayouts := slices.ContainsFunc(entries, func(p probe.Probe) bool {
		return slices.ContainsFunc(append(slices.Clip(p.Args), p.Dropped...), func(a probe.Arg) bool { return a.Layout != "" })
	})
	if (v&LayoutsFlag != 0) != hasLayouts {
		t.Errorf("version %#x for a table with layouts %v", v, hasLayouts)
	}
	// Automatic probes' tables, whose stubs are back to back, have
	// 32-bit slots: the semaphore low, the ring's flag high.
	if (v&WideFlag != 0) != backToBack || l.SlotSize != 2+2*boolInt(backToBack) {
		t.Errorf("version %#x, slots of %d bytes, for backToBack=%v", v, l.SlotSize, backToBack)
	}
	switch v &^= LayoutsFlag | WideFlag; {
	case !backToBack && v != version, backToBack && v != version4 && v != version5:
		t.Errorf("version %d for backToBack=%v", v, backToBack)
	case backToBack && len(entries) > 100 && v != version5:
		t.Errorf("%d probes' strings not deflated", len(entries))
	}
	if l.Size%8 != 0 || l.StubsOffset%8 != 0 || l.SlotsOffset%8 != 0 || l.StringsOffset%8 != 0 {
		t.Fatalf("layout not 8-aligned: %+v", l)
	}
	if want := (slots*l.SlotSize + 7) / 8 * 8 / l.SlotSize; l.SemaphoreSlots != want {
		t.Errorf("%d semaphore slots, want %d", l.SemaphoreSlots, want)
	}
	if got := binary.LittleEndian.Uint32(img.Bytes[20:]); got != uint32(slots) {
		t.Errorf("header says %d slots, want %d", got, slots)
	}
	if l.StubsOffset != l.SemaphoreOffset(l.SemaphoreSlots) || l.Stubs() != stubs || l.Count != len(entries) {
		t.Errorf("inconsistent layout %+v", l)
	}
	if 24+l.SlotSize*l.SemaphoreSlots+8*l.TailWords() != l.Size {
		t.Errorf("header, semaphores and tail words do not make up the table: %+v", l)
	}
	for off := 24; off < l.StubsOffset; off++ {
		if img.Bytes[off] != 0 {
			t.Fatalf("semaphore byte at %d is %#x, want 0", off, img.Bytes[off])
		}
	}
	sites, size, err := Decode(link(img), 0x500000)
	if err != nil {
		t.Fatal(err)
	}
	if size != l.Size {
		t.Errorf("size %d, want %d", size, l.Size)
	}
	if len(sites) != len(entries) {
		t.Fatalf("got %d sites, want %d", len(sites), len(entries))
	}
	for i, s := range sites {
		if s.Package != "example.com/pkg" {
			t.Errorf("site %d: package %q", i, s.Package)
		}
		built := s
		built.Package, built.PC, built.Semaphore, built.WideSemaphore = "", 0, 0, false
		if s.WideSemaphore != backToBack {
			t.Errorf("site %d: wide semaphore %v, want %v", i, s.WideSemaphore, backToBack)
		}
		if !reflect.DeepEqual(built, entries[i]) {
			t.Errorf("site %d: %+v, want %+v", i, built, entries[i])
		}
		if s.PC != stubAt(i) {
			t.Errorf("site %d: stub %#x", i, s.PC)
		}
		if want := uint64(0x500000 + 24 + l.SlotSize*entries[i].Slot); s.Semaphore != want || s.Semaphore%uint64(l.SlotSize) != 0 {
			t.Errorf("site %d: semaphore %#x, want %#x", i, s.Semaphore, want)
		}
	}
}

// TestNotesOnly round-trips a table of note-only probes (version 6): no
// semaphore, no stub, each probe's function; a tracer places them by it.
func TestNotesOnly(t *testing.T) {
	probes := []probe.Probe{
		{Provider: "go", Name: "entry__bbolt__Cursor__keyValue", Spec: "-8@152(%r14) 8@%rax", Receiver: "*", Func: "go.etcd.io/bbolt.(*Cursor).keyValue",
			Args: []probe.Arg{{Name: "goid", Type: "int64", Kind: probe.Int64}, {Name: "c", Type: "*Cursor", Kind: probe.Pointer, Layout: `{"k":"ptr","s":8}`}}},
		{Provider: "go", Name: "exit__bbolt__Cursor__keyValue", Spec: "-8@152(%r14) 8@$0 4@%rsi", Receiver: "*", Func: "go.etcd.io/bbolt.(*Cursor).keyValue",
			Args:    []probe.Arg{{Name: "goid", Type: "int64", Kind: probe.Int64}, {Name: "elapsed", Type: "time.Duration", Kind: probe.Int64}, {Type: "uint32", Kind: probe.Uint32}},
			Dropped: []probe.Arg{{Type: "[]byte"}, {Type: "[]byte"}}},
		{Provider: "go", Name: "inlined__bbolt__small", Func: "go.etcd.io/bbolt.small"},
	}
	img, err := Build("go.etcd.io/bbolt", probes, false)
	if err != nil {
		t.Fatal(err)
	}
	if v := img.Bytes[len(Magic)-1]; v != version6|LayoutsFlag {
		t.Errorf("version %#x, want %#x", v, version6|LayoutsFlag)
	}
	if l := img.Layout; l.Stubs() != 0 || l.SemaphoreSlots != 0 {
		t.Errorf("a table of note-only probes has %d stubs and %d semaphores", l.Stubs(), l.SemaphoreSlots)
	}
	got, size, err := Decode(img.Bytes, 0x500000)
	if err != nil {
		t.Fatal(err)
	}
	if size != img.Layout.Size {
		t.Errorf("size %d, want %d", size, img.Layout.Size)
	}
	for i := range got {
		want := probes[i]
		want.Package = "go.etcd.io/bbolt"
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("probe %d: %+v, want %+v", i, got[i], want)
		}
	}
}

// TestSharedSemaphore checks the case the format exists for: sites with one
// slot share a semaphore address, and only they do.
func TestSharedSemaphore(t *testing.T) {
	img, err := Build("example.com/pkg", []probe.Probe{entry("go", "entry__f", "", 0), entry("go", "exit__f", "", 0), entry("go", "entry__g", "", 1)}, false)
	if err != nil {
		t.Fatal(err)
	}
	sites, _, err := Decode(link(img), 0x500000)
	if err != nil {
		t.Fatal(err)
	}
	if sites[0].Semaphore != sites[1].Semaphore {
		t.Errorf("entry and exit of f have semaphores %#x and %#x, want one", sites[0].Semaphore, sites[1].Semaphore)
	}
	if sites[2].Semaphore == sites[0].Semaphore {
		t.Errorf("g shares f's semaphore %#x", sites[0].Semaphore)
	}
}

func TestDecodeRejects(t *testing.T) {
	img, err := Build("", []probe.Probe{entry("p", "n", "8@8(%rsp)", 0), entry("p", "m", "", 1)}, false)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Build("", []probe.Probe{entry("p", "n", "8@8(%rsp)", 0), entry("p", "m", "", 1)}, true)
	if err != nil {
		t.Fatal(err)
	}
	l := img.Layout
	linked := link(img)
	with := func(f func(b []byte)) []byte {
		b := append([]byte(nil), linked...)
		f(b)
		return b
	}
	// deflated is the back-to-back table with its strings replaced by
	// blob, the checksum made right.
	deflated := func(blob []byte) []byte {
		bl := back.Layout
		b := append(link(back)[:bl.StringsOffset], blob...)
		b[len(Magic)-1] = version5 | WideFlag
		b = append(b, make([]byte, pad8(len(b))-len(b))...)
		binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
		binary.LittleEndian.PutUint32(b[16:], checksum(b[bl.SlotsOffset:]))
		return b
	}
	if back.Bytes[len(Magic)-1] != version4|WideFlag {
		t.Fatal("two probes' strings deflated")
	}
	whole := deflate(back.Bytes[back.Layout.StringsOffset:])
	announced, k := binary.Uvarint(whole)
	stream := whole[k:]
	sized := func(n uint64) []byte { return append(binary.AppendUvarint(nil, n), stream...) }
	// The deflated cases below each break one thing in this table.
	if _, _, err := Decode(deflated(sized(announced)), 0x1000); err != nil {
		t.Fatalf("the version 5 table the cases change: %v", err)
	}
	// resum recomputes the checksum, so only the check under test fails.
	resum := func(b []byte) {
		binary.LittleEndian.PutUint32(b[16:], checksum(b[l.SlotsOffset:l.Size]))
	}
	tests := []struct {
		name string
		b    []byte
		err  error // nil: any error
	}{
		{"empty", nil, ErrNotTable},
		{"no magic", make([]byte, 64), ErrNotTable},
		{"old magic", with(func(b []byte) { b[7] = 0x01 }), ErrNotTable},
		{"truncated", linked[:30], ErrNotTable},
		{"cut before the end", linked[:l.Size-8], ErrNotTable},
		{"strings checksum", with(func(b []byte) { b[l.Size-9] ^= 1 }), ErrNotTable},
		{"slot array checksum", with(func(b []byte) { b[l.SlotsOffset] ^= 1 }), ErrNotTable},
		{"slot padding checksum", with(func(b []byte) { b[l.SlotsOffset+5] = 1 }), ErrNotTable},
		{"slot out of range", with(func(b []byte) {
			binary.LittleEndian.PutUint16(b[l.SlotsOffset+2:], 2)
			resum(b)
		}), ErrNotTable},
		{"no slots", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[20:], 0)
			resum(b)
		}), ErrNotTable},
		{"too many slots", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[20:], 1<<16+1)
			resum(b)
		}), ErrNotTable},
		{"size not a multiple of 8", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[12:], uint32(l.Size-1))
		}), ErrNotTable},
		{"size inside the slot array", with(func(b []byte) {
			binary.LittleEndian.PutUint32(b[12:], uint32(l.SlotsOffset))
		}), ErrNotTable},
		{"strings run short", with(func(b []byte) {
			for i := l.StringsOffset; i < l.Size; i++ {
				b[i] = 'x'
			}
			resum(b)
		}), ErrNotTable},
		{"pool larger than the strings", with(func(b []byte) {
			b[l.StringsOffset] = 0x7f
			resum(b)
		}), ErrNotTable},
		{"reference past the pool", with(func(b []byte) {
			pool := int(b[l.StringsOffset])
			b[l.StringsOffset+1+pool] = byte(pool) // the package
			resum(b)
		}), ErrNotTable},
		{"records run short", with(func(b []byte) {
			pool := int(b[l.StringsOffset])
			for i := l.StringsOffset + 1 + pool + 3; i < l.Size; i++ {
				b[i] = 0x80 // a uvarint that never ends
			}
			resum(b)
		}), ErrNotTable},
		{"v2 names run short", v2(t, "\x00p\x00n\x008@8(%rsp)\x00p\x00m\x00\x00names\x003\x00"), ErrNotTable},
		{"unrelocated stub", img.Bytes, nil},
		{"unrelocated first stub, back to back", back.Bytes, nil},
		{"newer version", with(func(b []byte) { b[7] = version5 + 1 }), ErrNotTable},
		{"deflated strings larger than announced", deflated(sized(announced - 1)), ErrNotTable},
		{"deflated strings smaller than announced", deflated(sized(announced + 1)), ErrNotTable},
		{"deflated strings announced too large", deflated(sized(maxInflated + 1)), ErrNotTable},
		{"deflated stream cut short", deflated(sized(announced)[:k+len(stream)/2]), ErrNotTable},
		{"deflated strings not deflate", deflated(append(binary.AppendUvarint(nil, 8), 0xff, 0xff, 0xff)), ErrNotTable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode(tt.b, 0x1000)
			switch {
			case err == nil:
				t.Fatal("Decode succeeded")
			case tt.err != nil && !errors.Is(err, tt.err):
				t.Fatalf("Decode: %v, want %v", err, tt.err)
			case tt.err == nil && errors.Is(err, ErrNotTable):
				t.Fatalf("Decode: %v, want a real error", err)
			}
		})
	}
	// Strings announced far past what their stream can hold are refused
	// before anything the size of the announcement is allocated.
	t.Run("deflated strings announced past DEFLATE's ratio", func(t *testing.T) {
		b := deflated(sized(maxInflated / 2))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := Decode(b, 0x1000)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrNotTable) {
			t.Fatalf("Decode: %v, want %v", err, ErrNotTable)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("Decode allocated %d bytes for a %d-byte stream", grew, len(stream))
		}
	})
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name    string
		entries []probe.Probe
	}{
		{"NUL byte", []probe.Probe{entry("p", "a\x00b", "", 0)}},
		{"negative slot", []probe.Probe{entry("p", "a", "", 0), entry("p", "b", "", -1)}},
		{"slot too large", []probe.Probe{entry("p", "a", "", 1<<16)}},
		{"NUL in a type", []probe.Probe{{Provider: "p", Name: "a", Args: []probe.Arg{{Name: "x", Type: "struct{a string \"\x00\"}", Kind: probe.Int64}}}}},
		{"a stub and a note-only probe", []probe.Probe{entry("p", "a", "", 0), {Provider: "p", Name: "b", Func: "main.b"}}},
		{"a note-only probe with a semaphore", []probe.Probe{{Provider: "p", Name: "b", Func: "main.b", Slot: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Build("", tt.entries, false); err == nil {
				t.Fatal("Build succeeded")
			}
		})
	}
	if _, err := Build("", []probe.Probe{entry("p", "a", "", 1<<16-1)}, false); err != nil {
		t.Errorf("the highest slot: %v", err)
	}
}

// v2 is a version 2 table of two probes, a with one slot and b with
// another, whose strings are strs.
func v2(t testing.TB, strs string) []byte {
	img, err := Build("", []probe.Probe{entry("p", "a", "", 0), entry("p", "b", "", 1)}, false)
	if err != nil {
		t.Fatal(err)
	}
	l := img.Layout
	b := link(img)[:l.StringsOffset]
	b[len(Magic)-1] = version2
	b = append(b, strs...)
	b = append(b, make([]byte, pad8(len(b))-len(b))...)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
	binary.LittleEndian.PutUint32(b[16:], checksum(b[l.SlotsOffset:]))
	return b
}

// TestDecodeOlder reads version 2 tables, as usdtgen and usdt-toolexec
// wrote them before the string pool, and before kinds, then names,
// existed: the strings end after the args, or after the kinds, or the
// names.
func TestDecodeOlder(t *testing.T) {
	args := "\x00p\x00a\x00-8@8(%rsp)\x00p\x00b\x00\x00"
	tests := []struct {
		name    string
		strings string
		args    []probe.Arg // of probe a; b has none
	}{
		{"without kinds", args, nil},
		{"without names", args + "kinds\x00int64\x00\x00", []probe.Arg{{Kind: probe.Int64}}},
		{"with names", args + "kinds\x00int64\x00\x00names\x001\x00x\x00int64\x000\x00", []probe.Arg{{Name: "x", Type: "int64", Kind: probe.Int64}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sites, _, err := Decode(v2(t, tt.strings), 0x500000)
			if err != nil {
				t.Fatal(err)
			}
			if len(sites) != 2 || sites[0].Spec != "-8@8(%rsp)" || !reflect.DeepEqual(sites[0].Args, tt.args) || sites[1].Args != nil {
				t.Errorf("got %+v, want probe a with args %+v", sites, tt.args)
			}
		})
	}
}

// FuzzDecode feeds Decode tables of two probes, of any version, whose
// strings, where every part of the format is read, are the fuzzer's (the
// checksum made right): whatever it decodes, Build must lay out again and
// Decode read back the same, and nothing may panic (the tracer runs as root
// on binaries it did not build). Version 5 strings are a DEFLATE stream,
// so version 4, the same records uncompressed, is what fuzzes the records
// of a back-to-back table.
func FuzzDecode(f *testing.F) {
	named := probe.Probe{
		Provider: "go", Name: "exit__main__f", Spec: "-8@8(%rsp) 8@16(%rsp)", Slot: 1,
		Args:    []probe.Arg{{Name: "goid", Type: "int64", Kind: probe.Int64}, {Name: "", Type: "string", Kind: probe.String}},
		Dropped: []probe.Arg{{Name: "_", Type: "[]byte"}},
	}
	// class is the layout a version gives a table: stubs each, stubs back
	// to back, or no stubs (note-only probes).
	class := func(ver byte) int {
		switch {
		case notesOnly(ver):
			return 2
		case backToBack(ver):
			return 1
		}
		return 0
	}
	base := map[int][]byte{} // by class, the table up to its strings
	slotsOffset := map[int]int{}
	noted := named
	noted.Slot, noted.Func = 0, "example.com/pkg.(*T).f"
	other := entry("p", "b", "", 0)
	other.Func = "example.com/pkg.g"
	for _, c := range []struct {
		ver    byte
		probes []probe.Probe
	}{
		{version, []probe.Probe{named, entry("p", "b", "", 0)}},
		{version4, []probe.Probe{named, entry("p", "b", "", 0)}},
		{version6, []probe.Probe{noted, other}},
	} {
		img, err := Build("example.com/pkg", c.probes, c.ver == version4)
		if err != nil {
			f.Fatal(err)
		}
		l := img.Layout
		base[class(c.ver)], slotsOffset[class(c.ver)] = link(img)[:l.StringsOffset], l.SlotsOffset
		strs := img.Bytes[l.StringsOffset:]
		switch c.ver {
		case version4:
			f.Add(byte(version4), strs)
			f.Add(byte(version5), deflate(strs))
		default:
			f.Add(c.ver, strs)
		}
	}
	f.Add(byte(version2), []byte("\x00p\x00a\x00-8@8(%rsp)\x00p\x00b\x00\x00kinds\x00int64\x00\x00names\x001\x00x\x00int64\x000\x00"))
	f.Fuzz(func(t *testing.T, ver byte, strs []byte) {
		if !isMagic(append(Magic[:len(Magic)-1:len(Magic)-1], ver)) {
			return
		}
		back := backToBack(ver)
		b := append(append([]byte(nil), base[class(ver)]...), strs...)
		b[len(Magic)-1] = ver
		b = append(b, make([]byte, pad8(len(b))-len(b))...)
		binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
		binary.LittleEndian.PutUint32(b[16:], checksum(b[slotsOffset[class(ver)]:]))
		probes, _, err := Decode(b, 0x500000)
		if err != nil {
			return
		}
		img, err := Build(probes[0].Package, probes, back)
		if err != nil {
			t.Fatalf("Build of what Decode read: %v", err)
		}
		again, _, err := Decode(link(img), 0x500000)
		if err != nil {
			t.Fatalf("Decode of what Build laid out again: %v", err)
		}
		for i := range probes {
			probes[i].PC, again[i].PC = 0, 0
			if back && ver&WideFlag == 0 {
				// Build lays stubs back to back out with wide
				// slots: where a narrow table's semaphores were
				// is not where the new table's are.
				probes[i].Semaphore, again[i].Semaphore = 0, 0
				probes[i].WideSemaphore, again[i].WideSemaphore = false, false
			}
		}
		if !reflect.DeepEqual(again, probes) {
			t.Errorf("read back\n%+v\nwant\n%+v", again, probes)
		}
	})
}

// Decode reads the table at the start of b, which was loaded at address
// addr, as the scanner reads each table it finds: its probes have all the
// fields Build reads, and Package, PC and Semaphore. It returns the
// table's size.
func Decode(b []byte, addr uint64) ([]probe.Probe, int, error) {
	n, size, err := header(b)
	if err != nil {
		return nil, 0, err
	}
	probes := make([]probe.Probe, n)
	if err := decodeInto(probes, b[:size], addr); err != nil {
		return nil, 0, err
	}
	return probes, size, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSlotSizes decodes a table of stubs back to back as the wrappers
// before WideFlag wrote it, 2-byte semaphores that only the kernel and
// the tracers count, beside today's 32-bit slots, and rejects WideFlag
// on a table of stubs anywhere (usdtgen's), whose semaphores stay 2
// bytes: the Go and C code usdtgen wrote declares them so.
func TestSlotSizes(t *testing.T) {
	probes := []probe.Probe{entry("p", "a", "", 0), entry("p", "b", "", 1), entry("p", "c", "", 2)}
	wide, err := Build("", probes, true)
	if err != nil {
		t.Fatal(err)
	}
	wl := wide.Layout
	v := wide.Bytes[len(Magic)-1] &^ WideFlag
	nl := newLayout(v, wl.Count, len(probes), wl.Size-wl.StringsOffset)
	b := make([]byte, nl.Size)
	copy(b, wide.Bytes[:headerSize])
	b[len(Magic)-1] = v
	copy(b[nl.StubsOffset:], wide.Bytes[wl.StubsOffset:])
	binary.LittleEndian.PutUint32(b[12:], uint32(nl.Size))
	binary.LittleEndian.PutUint32(b[16:], checksum(b[nl.SlotsOffset:]))
	narrow := Image{Layout: nl, Bytes: b}
	for _, tt := range []struct {
		img  Image
		size int
	}{{wide, 4}, {narrow, 2}} {
		sites, _, err := Decode(link(tt.img), 0x500000)
		if err != nil {
			t.Fatalf("version %#x: %v", tt.img.Bytes[len(Magic)-1], err)
		}
		for i, s := range sites {
			if want := uint64(0x500000 + headerSize + tt.size*i); s.Semaphore != want || s.WideSemaphore != (tt.size == 4) {
				t.Errorf("version %#x, probe %d: semaphore %#x, wide %v; want %#x, %v", tt.img.Bytes[len(Magic)-1], i, s.Semaphore, s.WideSemaphore, want, tt.size == 4)
			}
		}
	}
	anywhere, err := Build("", probes, false)
	if err != nil {
		t.Fatal(err)
	}
	bad := link(anywhere)
	bad[len(Magic)-1] |= WideFlag
	if _, _, err := Decode(bad, 0x500000); err == nil {
		t.Errorf("a table of stubs anywhere with WideFlag decoded")
	}
}
