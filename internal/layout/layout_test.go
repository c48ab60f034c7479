package layout

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"testing"
	"unsafe"
)

func check(t *testing.T) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/go-usdt/usdt/internal/layout", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// same compares a layout with the type the compiler laid out, to depth.
func same(t *testing.T, path string, l *Type, rt reflect.Type, depth int) {
	t.Helper()
	if l.Size != int64(rt.Size()) {
		t.Errorf("%s: size %d, compiler %d", path, l.Size, rt.Size())
	}
	want := map[reflect.Kind]Kind{
		reflect.Bool: Bool, reflect.Int: Int, reflect.Int8: Int, reflect.Uint64: Uint, reflect.Int16: Int, reflect.Int32: Int, reflect.Int64: Int, reflect.Uint8: Uint,
		reflect.Float64: Float, reflect.String: String, reflect.Pointer: Pointer, reflect.Struct: Struct, reflect.Array: Array,
		reflect.Slice: Slice, reflect.Map: Map, reflect.Interface: Iface,
	}[rt.Kind()]
	if rt.Kind() == reflect.Interface && rt.NumMethod() == 0 {
		want = Eface
	}
	if l.Kind != want {
		t.Errorf("%s: kind %s, compiler %s", path, l.Kind, rt.Kind())
	}
	if depth == 0 {
		return
	}
	switch rt.Kind() {
	case reflect.Struct:
		if len(l.Fields) != rt.NumField() {
			t.Fatalf("%s: %d fields, compiler %d", path, len(l.Fields), rt.NumField())
		}
		for i, f := range l.Fields {
			rf := rt.Field(i)
			if f.Name != rf.Name || f.Offset != int64(rf.Offset) || f.Embedded != rf.Anonymous {
				t.Errorf("%s: field %d %s at %d embedded %v, compiler %s at %d embedded %v", path, i, f.Name, f.Offset, f.Embedded, rf.Name, rf.Offset, rf.Anonymous)
			}
			same(t, path+"."+f.Name, f.Type, rf.Type, depth-1)
		}
	case reflect.Pointer, reflect.Slice, reflect.Array:
		if l.Elem == nil {
			t.Fatalf("%s: no element within the depth", path)
		}
		if rt.Kind() == reflect.Array && l.Len != int64(rt.Len()) {
			t.Errorf("%s: length %d, compiler %d", path, l.Len, rt.Len())
		}
		same(t, path+"[]", l.Elem, rt.Elem(), depth-1)
	}
}

func TestOf(t *testing.T) {
	pkg := check(t)
	sizes := types.SizesFor("gc", "amd64")
	for _, tt := range []struct {
		name string
		rt   reflect.Type
	}{
		{"Order", reflect.TypeFor[Order]()},
		{"Addr", reflect.TypeFor[Addr]()},
	} {
		typ := pkg.Scope().Lookup(tt.name).Type()
		l, ok := Of(typ, sizes, nil)
		if !ok {
			t.Fatalf("%s: not valid", tt.name)
		}
		if l.Name != "github.com/go-usdt/usdt/internal/layout."+tt.name {
			t.Errorf("%s: named %q", tt.name, l.Name)
		}
		again, err := Decode(l.Encode())
		if err != nil || !reflect.DeepEqual(again, l) {
			t.Errorf("%s: encoded and decoded, %+v (%v), want %+v", tt.name, again, err, l)
		}
		same(t, tt.name, l, tt.rt, 2)
	}
}

// TestOfBounded: a linked list's layout stops at MaxDepth, and a type
// the check rejects makes it invalid.
func TestOfBounded(t *testing.T) {
	pkg := check(t)
	sizes := types.SizesFor("gc", "arm64")
	l, ok := Of(types.NewPointer(pkg.Scope().Lookup("Node").Type()), sizes, nil)
	if !ok {
		t.Fatal("not valid")
	}
	depth := 0
	for p := l; p != nil; depth++ {
		if p.Kind != Pointer {
			t.Fatalf("level %d: kind %s", depth, p.Kind)
		}
		if p.Elem == nil || len(p.Elem.Fields) < 2 {
			break
		}
		p = p.Elem.Fields[1].Type
	}
	if depth != MaxDepth/2 {
		t.Errorf("the list's layout is %d nodes deep, want %d", depth, MaxDepth/2)
	}
	if _, ok := Of(pkg.Scope().Lookup("Order").Type(), sizes, func(n *types.Named) bool { return n.Obj().Name() != "Addr" }); ok {
		t.Error("a layout holding a rejected named type is valid")
	}
}

// TestOfMap: a map's slot is where the compiler's group type for the map
// (abi.MapType.Group, which the runtime reads and writes the map's
// entries by) puts a key and an elem; a key or an elem too large to be
// held in place gives none.
func TestOfMap(t *testing.T) {
	pkg := check(t)
	sizes := types.SizesFor("gc", "amd64")
	st := pkg.Scope().Lookup("Maps").Type().Underlying().(*types.Struct)
	rt := reflect.TypeFor[Maps]()
	for i := range st.NumFields() {
		name := st.Field(i).Name()
		l, ok := Of(st.Field(i).Type(), sizes, nil)
		if !ok || l.Kind != Map || l.Size != 8 {
			t.Fatalf("%s: %+v, valid %v", name, l, ok)
		}
		group := groupOf(rt.Field(i).Type)
		if (l.Elem == nil) != (name == "Big") {
			t.Fatalf("%s: slot %+v, the compiler's group %v", name, l.Elem, group)
		}
		if l.Elem == nil {
			continue
		}
		if slots, ok := group.FieldByName("slots"); ok {
			same(t, name+" slot", l.Elem, slots.Type.Elem(), 2)
			continue
		}
		// GOEXPERIMENT=mapsplitgroup: the keys, then the elems.
		keys, _ := group.FieldByName("keys")
		elems, _ := group.FieldByName("elems")
		same(t, name+" key", l.Elem.Fields[0].Type, keys.Type.Elem(), 2)
		same(t, name+" elem", l.Elem.Fields[1].Type, elems.Type.Elem(), 2)
		if keys.Offset != 8 || elems.Offset != 8+8*uintptr(l.Elem.Fields[0].Type.Size) {
			t.Errorf("%s: keys at %d, elems at %d", name, keys.Offset, elems.Offset)
		}
	}
}

// groupOf is the compiler's group type of the map type m: the Group of
// its abi.MapType, after the abi.Type (48 bytes) and the key's and the
// elem's types.
func groupOf(m reflect.Type) reflect.Type {
	const mapTypeGroup = 64
	words := *(*[2]unsafe.Pointer)(unsafe.Pointer(&m))
	words[1] = *(*unsafe.Pointer)(unsafe.Add(words[1], mapTypeGroup))
	return *(*reflect.Type)(unsafe.Pointer(&words))
}
