package rewrite_test

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"regexp"
	"strconv"
	"testing"

	"github.com/go-usdt/usdt/internal/probetable"
)

// The probe table's strings are deflated with the running Go release's
// compress/flate, or kept as they are when that gains nothing, and
// releases deflate differently: Go 1.27's encoder is not 1.26's. The
// deflated bytes, and with them the table's version (4 or 5), size and
// checksum, are the release's, not rewrite's. So the goldens hold the
// table with its strings inflated, by compress/flate's reader (DEFLATE
// decodes alike everywhere), and placeholders for the size and checksum,
// which this file checks against the layout package probetable documents.

var (
	dataLine  = regexp.MustCompile(`^DATA (\S+)\+(\d+)\(SB\)/8, \$(\S+)$`)
	globlLine = regexp.MustCompile(`^GLOBL (\S+)\(SB\), 16, \$(\d+)$`)
	tailDecl  = regexp.MustCompile(`(?m)^(\ttail\s+)\[(\d+)\]uint64$`)
)

// table is a probe table read back from the DATA directives that write it.
type table struct {
	name  string
	bytes []byte
	// The offsets of its parts.
	stubs, slots, strings int
}

func pad8(n int) int { return (n + 7) &^ 7 }

// readTables finds the probe tables in asm, the GLOBLs that are not
// code (a package's table, then that of its note-only probes where it
// has them), and checks each one's header and checksum.
func readTables(t *testing.T, asm []byte) []table {
	t.Helper()
	var tabs []table
	for line := range bytes.Lines(asm) {
		if m := globlLine.FindSubmatch(bytes.TrimSuffix(line, []byte("\n"))); m != nil {
			size, _ := strconv.Atoi(string(m[2]))
			tabs = append(tabs, table{name: string(m[1]), bytes: make([]byte, size)})
		}
	}
	if len(tabs) == 0 {
		t.Fatalf("no table in\n%s", asm)
	}
	for i := range tabs {
		tabs[i].read(t, asm)
	}
	return tabs
}

// read fills in tab from the DATA directives of asm, and checks it.
func (tab *table) read(t *testing.T, asm []byte) {
	t.Helper()
	for line := range bytes.Lines(asm) {
		m := dataLine.FindSubmatch(bytes.TrimSuffix(line, []byte("\n")))
		if m == nil || string(m[1]) != tab.name {
			continue
		}
		off, _ := strconv.Atoi(string(m[2]))
		if off+8 > len(tab.bytes) {
			t.Fatalf("DATA at %d past the table's %d bytes", off, len(tab.bytes))
		}
		// A stub's address is the linker's to write: zero here.
		if w, err := strconv.ParseUint(string(m[3]), 0, 64); err == nil {
			binary.LittleEndian.PutUint64(tab.bytes[off:], w)
		}
	}
	b := tab.bytes
	if len(b) < 24 || string(b[:7]) != "\x7fUSDTgo" {
		t.Fatalf("table %s starts with %q", tab.name, b[:min(len(b), 8)])
	}
	count := int(binary.LittleEndian.Uint32(b[8:]))
	slots := int(binary.LittleEndian.Uint32(b[20:]))
	if size := int(binary.LittleEndian.Uint32(b[12:])); size != len(b) {
		t.Fatalf("table %s says it has %d bytes, GLOBL %d", tab.name, size, len(b))
	}
	stubs := count
	switch tab.version() {
	case 4, 5:
		stubs = min(count, 1)
	case 6: // note-only probes, which have no stub
		stubs = 0
	}
	slotSize := 2
	if tab.wide() {
		slotSize = 4
	}
	tab.stubs = 24 + pad8(slotSize*slots)
	tab.slots = tab.stubs + 8*stubs
	tab.strings = tab.slots + pad8(2*count)
	if tab.strings > len(b) {
		t.Fatalf("table %s of %d bytes has its strings at %d", tab.name, len(b), tab.strings)
	}
	h := fnv.New32a()
	h.Write(b[tab.slots:])
	if sum := binary.LittleEndian.Uint32(b[16:]); sum != h.Sum32() {
		t.Fatalf("table %s checksum %#x, FNV-1a of its slots and strings %#x", tab.name, sum, h.Sum32())
	}
}

// version is the table's layout version, without the flags that say its
// records carry the arguments' type layouts and its semaphores are the
// low halves of 32-bit slots.
func (tab table) version() byte {
	return tab.bytes[7] &^ (probetable.LayoutsFlag | probetable.WideFlag)
}

// wide says the table's semaphore slots are 32 bits (probetable.WideFlag).
func (tab table) wide() bool { return tab.bytes[7]&probetable.WideFlag != 0 }

// inflated is the table's strings as they are, padded to 8 bytes as a
// version 4 table stores them.
func (tab table) inflated(t *testing.T) []byte {
	t.Helper()
	b := tab.bytes[tab.strings:]
	if v := tab.version(); v != 5 && v != 6 {
		return b
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		t.Fatalf("table %s: no size before its deflated strings", tab.name)
	}
	s, err := io.ReadAll(flate.NewReader(bytes.NewReader(b[k:])))
	if err != nil || uint64(len(s)) != n {
		t.Fatalf("table %s: strings inflate to %d bytes (%v), announced %d", tab.name, len(s), err, n)
	}
	return append(s, make([]byte, pad8(len(s))-len(s))...)
}

// releaseFree rewrites the tables' directives in asm: their header
// words with the size and checksum as placeholders, the version as
// "back to back" when it is 4 or 5, their strings as quoted comments.
func releaseFree(t *testing.T, asm []byte, tabs []table) []byte {
	t.Helper()
	var out bytes.Buffer
	for line := range bytes.Lines(asm) {
		out.Write(releaseFreeLine(t, line, tabs))
	}
	return out.Bytes()
}

// releaseFreeLine is releaseFree of one line of the assembly.
func releaseFreeLine(t *testing.T, line []byte, tabs []table) []byte {
	t.Helper()
	trimmed := bytes.TrimSuffix(line, []byte("\n"))
	if m := globlLine.FindSubmatch(trimmed); m != nil {
		for _, tab := range tabs {
			if tab.name != string(m[1]) {
				continue
			}
			var out bytes.Buffer
			for s := tab.inflated(t); len(s) > 0; s = s[min(len(s), 48):] {
				fmt.Fprintf(&out, "// strings: %s\n", strconv.QuoteToASCII(string(s[:min(len(s), 48)])))
			}
			fmt.Fprintf(&out, "GLOBL %s(SB), 16, $<size>\n", tab.name)
			return out.Bytes()
		}
	}
	m := dataLine.FindSubmatch(trimmed)
	if m == nil {
		return line
	}
	for _, tab := range tabs {
		if string(m[1]) != tab.name {
			continue
		}
		off, _ := strconv.Atoi(string(m[2]))
		w := binary.LittleEndian.Uint64(tab.bytes[off:])
		switch {
		case off == 0 && (tab.version() == 4 || tab.version() == 5):
			wide := ""
			if tab.wide() {
				wide = ", 32-bit slots"
			}
			return fmt.Appendf(nil, "DATA %s+0(SB)/8, $<magic, back to back%s>\n", tab.name, wide)
		case off == 8:
			return fmt.Appendf(nil, "DATA %s+8(SB)/8, $0x<size>%08x\n", tab.name, uint32(w))
		case off == 16:
			return fmt.Appendf(nil, "DATA %s+16(SB)/8, $0x%08x<checksum>\n", tab.name, w>>32)
		case off < tab.strings:
			return line
		}
		return nil
	}
	return line
}

// releaseFreeDecl replaces the number of words the Go declaration of the
// table gives its tail (stubs, slots and strings) by a placeholder, once
// it is checked against the table's size.
func (tab table) releaseFreeDecl(t *testing.T, src []byte) []byte {
	t.Helper()
	return tailDecl.ReplaceAllFunc(src, func(decl []byte) []byte {
		m := tailDecl.FindSubmatch(decl)
		if n, _ := strconv.Atoi(string(m[2])); n != (len(tab.bytes)-tab.stubs)/8 {
			t.Errorf("the Go declaration's table tail has %d words, the assembly's %d", n, (len(tab.bytes)-tab.stubs)/8)
			return decl
		}
		return append(m[1], "[<tail words>]uint64"...)
	})
}
