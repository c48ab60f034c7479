package sdtnote

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// section is one section of a synthetic ELF file built by buildELF.
type section struct {
	name string
	typ  elf.SectionType
	data []byte
}

// buildELF returns a minimal relocatable ELF file holding secs, so that Read
// can be tested through debug/elf exactly as it runs on real binaries.
func buildELF(t *testing.T, class elf.Class, order binary.ByteOrder, secs []section) *elf.File {
	t.Helper()
	shstr := []byte{0}
	nameOff := make([]uint32, len(secs)+1)
	for i, s := range secs {
		nameOff[i] = uint32(len(shstr))
		shstr = append(append(shstr, s.name...), 0)
	}
	nameOff[len(secs)] = uint32(len(shstr))
	shstr = append(shstr, ".shstrtab\x00"...)
	secs = append(secs, section{name: ".shstrtab", typ: elf.SHT_STRTAB, data: shstr})

	ehsize, shentsize := 64, 64
	if class == elf.ELFCLASS32 {
		ehsize, shentsize = 52, 40
	}
	var body bytes.Buffer
	offs := make([]int, len(secs))
	for i, s := range secs {
		for body.Len()%4 != 0 {
			body.WriteByte(0)
		}
		offs[i] = ehsize + body.Len()
		body.Write(s.data)
	}
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	shoff := ehsize + body.Len()

	var out bytes.Buffer
	ident := [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(class), 0, byte(elf.EV_CURRENT)}
	if order == binary.LittleEndian {
		ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	} else {
		ident[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	shnum := uint16(len(secs) + 1)
	if class == elf.ELFCLASS32 {
		must(t, binary.Write(&out, order, elf.Header32{Ident: ident, Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_386),
			Version: 1, Shoff: uint32(shoff), Ehsize: uint16(ehsize), Shentsize: uint16(shentsize), Shnum: shnum, Shstrndx: shnum - 1}))
	} else {
		must(t, binary.Write(&out, order, elf.Header64{Ident: ident, Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_X86_64),
			Version: 1, Shoff: uint64(shoff), Ehsize: uint16(ehsize), Shentsize: uint16(shentsize), Shnum: shnum, Shstrndx: shnum - 1}))
	}
	out.Write(body.Bytes())
	out.Write(make([]byte, shentsize)) // section 0
	for i, s := range secs {
		if class == elf.ELFCLASS32 {
			must(t, binary.Write(&out, order, elf.Section32{Name: nameOff[i], Type: uint32(s.typ),
				Off: uint32(offs[i]), Size: uint32(len(s.data)), Addralign: 4}))
		} else {
			must(t, binary.Write(&out, order, elf.Section64{Name: nameOff[i], Type: uint32(s.typ),
				Off: uint64(offs[i]), Size: uint64(len(s.data)), Addralign: 4}))
		}
	}
	f, err := elf.NewFile(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("synthetic ELF does not parse: %v", err)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// encode32 writes notes the way a 32-bit toolchain does, to check that Read
// honours the file's class; Encode itself only writes 64-bit notes.
func encode32(notes []Note, order binary.ByteOrder) []byte {
	var out []byte
	for _, n := range notes {
		desc := make([]byte, 12)
		order.PutUint32(desc[0:], uint32(n.PC))
		order.PutUint32(desc[4:], uint32(n.Base))
		order.PutUint32(desc[8:], uint32(n.Semaphore))
		desc = append(desc, n.Provider+"\x00"+n.Name+"\x00"+n.Args+"\x00"...)
		hdr := make([]byte, 12)
		order.PutUint32(hdr[0:], 8)
		order.PutUint32(hdr[4:], uint32(len(desc)))
		order.PutUint32(hdr[8:], NoteType)
		out = append(append(append(out, hdr...), "stapsdt\x00"...), desc...)
		out = append(out, make([]byte, align4(len(desc))-len(desc))...)
	}
	return out
}

// gnuNote is a foreign note (a build id) that readers must skip.
func gnuNote(order binary.ByteOrder) []byte {
	b := make([]byte, 12)
	order.PutUint32(b[0:], 4)
	order.PutUint32(b[4:], 5) // unaligned descsz: padding must be honoured
	order.PutUint32(b[8:], 3) // same n_type as stapsdt, different owner
	b = append(b, "GNU\x00"...)
	return append(b, 1, 2, 3, 4, 5, 0, 0, 0)
}

func TestRoundTrip(t *testing.T) {
	one := []Note{{Provider: "prov", Name: "fire", Args: "8@8(%rsp)", PC: 0x401000, Base: 0x400fff, Semaphore: 0x5a0008}}
	// Descriptor lengths 24+len(strings)+3 covering every residue mod 4,
	// so every padding amount is exercised.
	var pads []Note
	for i := 0; i < 4; i++ {
		pads = append(pads, Note{Provider: "p", Name: "n" + strings.Repeat("x", i), Args: "", PC: uint64(i + 1), Base: 1})
	}
	many := []Note{
		{Provider: "go", Name: "entry__", Args: "-8@8(%rsp) 8@16(%rsp) 8@24(%rsp)", PC: 0x401234, Base: 0x401000},
		{Provider: "go", Name: "exit__", Args: "8@x0", PC: 0xffff_ffff_0000_1234, Base: 0xffff_ffff_0000_0000, Semaphore: 0xffff_ffff_0000_8002},
		{Provider: "c", Name: "plain", PC: 7},
	}
	tests := []struct {
		name  string
		class elf.Class
		order interface {
			binary.ByteOrder
			binary.AppendByteOrder
		}
		notes []Note
		extra bool // surround with a foreign note and a retired section
	}{
		{"one", elf.ELFCLASS64, binary.LittleEndian, one, false},
		{"padding", elf.ELFCLASS64, binary.LittleEndian, pads, false},
		{"many", elf.ELFCLASS64, binary.LittleEndian, many, false},
		{"big-endian", elf.ELFCLASS64, binary.BigEndian, many, false},
		{"foreign notes skipped", elf.ELFCLASS64, binary.LittleEndian, many, true},
		{"32-bit", elf.ELFCLASS32, binary.LittleEndian, []Note{{Provider: "a", Name: "b", Args: "4@%eax", PC: 0x8048000, Base: 0x8047fff, Semaphore: 0x804a000}}, false},
		{"none", elf.ELFCLASS64, binary.LittleEndian, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var data []byte
			if tc.class == elf.ELFCLASS32 {
				data = encode32(tc.notes, tc.order)
			} else {
				data = Encode(tc.notes, tc.order)
			}
			if len(data)%4 != 0 {
				t.Fatalf("Encode returned %d bytes, not 4-byte aligned", len(data))
			}
			var secs []section
			want := tc.notes
			if tc.extra {
				// First note in one section behind a foreign note, the rest in
				// a later one: Read must skip the foreign note, the retired
				// (SHT_NULL) and misnamed sections, and keep file order.
				first := Encode(tc.notes[:1], tc.order)
				secs = []section{
					{".note.gnu.build-id", elf.SHT_NOTE, gnuNote(tc.order)},
					{SectionName, elf.SHT_NULL, data},
					{SectionName, elf.SHT_NOTE, append(gnuNote(tc.order), first...)},
					{".note.other", elf.SHT_NOTE, data},
					{SectionName, elf.SHT_NOTE, data[len(first):]},
				}
			} else {
				secs = append(secs, section{SectionName, elf.SHT_NOTE, data})
			}
			got, err := Read(buildELF(t, tc.class, tc.order, secs))
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 && len(got) == 0 {
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Read = %+v\nwant   %+v", got, want)
			}
		})
	}
}

// TestEncodeLayout pins the exact bytes of one note: consumers parse them
// with fixed offsets, so a layout slip is invisible to a round trip.
func TestEncodeLayout(t *testing.T) {
	got := Encode([]Note{{Provider: "pr", Name: "nm", Args: "8@%rdi", PC: 0x1122, Base: 0x3344, Semaphore: 0x5566}}, binary.LittleEndian)
	want := []byte{
		8, 0, 0, 0, // namesz
		24 + 3 + 3 + 7, 0, 0, 0, // descsz, unpadded
		3, 0, 0, 0, // NT_STAPSDT
		's', 't', 'a', 'p', 's', 'd', 't', 0,
		0x22, 0x11, 0, 0, 0, 0, 0, 0,
		0x44, 0x33, 0, 0, 0, 0, 0, 0,
		0x66, 0x55, 0, 0, 0, 0, 0, 0,
		'p', 'r', 0, 'n', 'm', 0, '8', '@', '%', 'r', 'd', 'i', 0,
		0, 0, 0, // pad 37 to 40
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Encode =\n% x\nwant\n% x", got, want)
	}
}

func TestReadMalformed(t *testing.T) {
	le := binary.LittleEndian
	good := Encode([]Note{{Provider: "p", Name: "n", Args: "a", PC: 1}}, le)
	noNUL := append([]byte(nil), good...)
	// Overwrite the three string terminators and the padding.
	for i := 12 + 8 + 24; i < len(noNUL); i++ {
		noNUL[i] = 'x'
	}
	shortDesc := append([]byte(nil), good[:12+8]...)
	le.PutUint32(shortDesc[4:], 8)
	shortDesc = append(shortDesc, make([]byte, 8)...)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated header", append(append([]byte(nil), good...), 1, 2, 3), "truncated note header"},
		{"descriptor past end", good[:len(good)-8], "runs past the section"},
		{"strings not terminated", noNUL, "not NUL-terminated"},
		{"descriptor too short", shortDesc, "too short"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(buildELF(t, elf.ELFCLASS64, le, []section{{SectionName, elf.SHT_NOTE, tc.data}}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		args string
		want []string
	}{
		{"", nil},
		{"-8@%rdi 8@%rsi -4@16(%rsp)", []string{"-8@%rdi", "8@%rsi", "-4@16(%rsp)"}},
		// GCC's arm64 memory operands, and route (b)'s registers then stack.
		{"-4@[sp, 4] -4@[sp, 8]", []string{"-4@[sp, 4]", "-4@[sp, 8]"}},
		{"-8@x0 8@x7 -4@[sp, 0] 1@[x29]", []string{"-8@x0", "8@x7", "-4@[sp, 0]", "1@[x29]"}},
		{"  8@x0   8@[ sp , 8 ]  ", []string{"8@x0", "8@[ sp , 8 ]"}},
		// An unclosed bracket keeps the rest as one operand for the
		// operand's parser to refuse.
		{"8@x0 8@[sp, 16", []string{"8@x0", "8@[sp, 16"}},
	} {
		if got := SplitArgs(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
