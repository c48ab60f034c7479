package probetable

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-usdt/usdt/internal/probe"
)

// archive writes an ar archive of members, name then contents, as the go
// command's package archives are, and returns its path.
func archive(t *testing.T, members ...string) string {
	t.Helper()
	b := []byte("!<arch>\n")
	for i := 0; i < len(members); i += 2 {
		data := members[i+1]
		b = fmt.Appendf(b, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", members[i], 0, 0, 0, 0o644, len(data))
		b = append(b, data...)
		if len(data)%2 == 1 {
			b = append(b, '\n')
		}
	}
	path := filepath.Join(t.TempDir(), "_pkg_.a")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDecodeArchives: the tables of a package archive's objects, decoded
// before the link, give the linked tables' probes as decoding them does,
// and a table no archive holds is decoded all the same.
func TestDecodeArchives(t *testing.T) {
	var probes []probe.Probe
	for i := range 50 {
		probes = append(probes,
			entry("go", fmt.Sprintf("entry__pkg__F%d", i), "-8@%r13 8@%rbx", i, probe.Int64, probe.Pointer),
			entry("go", fmt.Sprintf("exit__pkg__F%d", i), "-8@%r13 -8@%rbx", i, probe.Int64, probe.Int64))
	}
	img, err := Build("example.com/pkg", probes, true)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Build("example.com/other", probes[:2], true)
	if err != nil {
		t.Fatal(err)
	}
	// In its object the table starts anywhere and has no stub address.
	obj := "\x01\x02\x03" + string(img.Bytes) + "\xff"
	path := archive(t, "__.PKGDEF", "export data", "_go_.o", "\x00go120ld"+string(other.Bytes), "usdt_probes.o", obj)
	ahead := DecodeArchives([]string{path, filepath.Join(t.TempDir(), "missing.a")})
	if n := len(ahead.tables); n != 1 {
		t.Fatalf("decoded %d tables ahead, want the one of usdt_probes.o", n)
	}
	// The linked section: the table at an aligned address, then one
	// decoded ahead by no archive.
	section := append(append(make([]byte, 16), link(img)...), make([]byte, 6)...)
	section = append(section, link(other)...)
	tables := locate(section, 0x500000, true, ".noptrdata")
	if len(tables) != 2 || ahead.find(tables[0].b) == nil || ahead.find(tables[1].b) != nil {
		t.Fatalf("found %d tables, want 2, the first decoded ahead only", len(tables))
	}
	want, err := decodeAll(locate(section, 0x500000, true, ".noptrdata"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeAll(tables, ahead)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(probes)+2 || !reflect.DeepEqual(got, want) {
		t.Errorf("with the tables decoded ahead, %d probes differ from the %d decoded after the link", len(got), len(want))
	}
	if got[0].PC != stubAt(0) || got[0].Semaphore != 0x500000+16+headerSize {
		t.Errorf("first probe at %#x, semaphore %#x: want the linked table's", got[0].PC, got[0].Semaphore)
	}
}
