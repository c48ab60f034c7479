package values

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestTypeNames names type descriptors of a small program from the
// runtime's type data alone, and wants the names its DWARF gives the
// types whose descriptors are at those addresses (DW_AT_go_runtime_type):
// DWARF is the compiler's, the reading is the code's under test. The
// same descriptors of the stripped build, which has no DWARF, get the
// same names. A struct's layout, read from its descriptors, has the
// fields DWARF gives it: names, offsets and sizes.
func TestTypeNames(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	dir := t.TempDir()
	src := `package main

import (
	"errors"
	"fmt"
	"os"
	"time"
)

type Base struct{ Kind uint8 }

type Order struct {
	ID int
	Base
	Name  string
	Tags  [3]uint16
	Ratio float32
	Next  *Order
}

func main() {
	_, err := os.Open("/nonexistent")
	fmt.Println(errors.New("x"), fmt.Errorf("w: %w", err), Order{ID: 1}, time.Second)
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/names\n\ngo 1.24\n"), 0o644)
	build := func(name string, flags ...string) string {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), ".")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return bin
	}
	plain, stripped := build("plain"), build("stripped", "-ldflags=-s -w")
	f, err := elf.Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	names, err := NewTypeNames(f)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	strippedNames, err := NewTypeNames(sf)
	if err != nil {
		t.Fatal(err)
	}
	// DWARF names types by package path, the runtime by package name.
	want := map[string]string{"*errors.errorString": "*errors.errorString", "*fmt.wrapError": "*fmt.wrapError", "*io/fs.PathError": "*fs.PathError",
		"main.Order": "main.Order", "time.Duration": "time.Duration", "syscall.Errno": "syscall.Errno"}
	found := map[string]bool{}
	structs := 0
	// DW_AT_go_runtime_type is an offset from the linker's runtime.types.
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var base uint64
	for _, s := range syms {
		if s.Name == "runtime.types" {
			base = s.Value
		}
	}
	if base == 0 {
		t.Fatal("no runtime.types symbol")
	}
	const goRuntimeType = dwarf.Attr(0x2904) // DW_AT_go_runtime_type
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		dwarfName, _ := e.Val(dwarf.AttrName).(string)
		off, ok := e.Val(goRuntimeType).(uint64)
		name, wanted := want[dwarfName]
		if !ok || !wanted {
			continue
		}
		found[dwarfName] = true
		addr := base + off
		got, err := names.Type(addr)
		if err != nil || got.Name != name {
			t.Errorf("descriptor at %#x (%s): %+v, %v", addr, name, got, err)
		}
		if st, isStruct := dwarfType(t, d, e).(*dwarf.StructType); isStruct {
			var want, fields []string
			for _, f := range st.Field {
				want = append(want, fmt.Sprintf("%s@%d:%d", f.Name, f.ByteOffset, f.Type.Size()))
			}
			if got.Layout != nil {
				for _, f := range got.Layout.Fields {
					fields = append(fields, fmt.Sprintf("%s@%d:%d", f.Name, f.Offset, f.Type.Size))
				}
			}
			if !slices.Equal(fields, want) {
				t.Errorf("%s: fields %q, DWARF %q", name, fields, want)
			}
			structs++
		}
		// The stripped build lays the type data out as the plain one:
		// each descriptor at the same offset from moduledata.types (the
		// same address up to Go 1.26; Go 1.27 moves the whole block).
		saddr := addr - names.types + strippedNames.types
		if sd, err := strippedNames.Type(saddr); err != nil || sd.Name != name {
			t.Errorf("stripped, descriptor at %#x (%s): %+v, %v", saddr, name, sd, err)
		}
	}
	if structs == 0 {
		t.Error("compared no struct's fields")
	}
	for name := range want {
		if !found[name] {
			t.Errorf("no DWARF type %s with a runtime type", name)
		}
	}
}

// dwarfType is the type the entry e describes, nil if none.
func dwarfType(t *testing.T, d *dwarf.Data, e *dwarf.Entry) dwarf.Type {
	t.Helper()
	if e.Tag != dwarf.TagStructType {
		return nil
	}
	typ, err := d.Type(e.Offset)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}
