// Package goidoff finds where a Go toolchain's runtime keeps a goroutine's
// id inside its g struct, so that code generated into any package (even one
// the runtime package depends on) can read the id with two loads.
//
// The offset comes from type-checking the toolchain's own runtime source
// with go/types, whose "gc" sizes reproduce the compiler's layout exactly
// (go vet's asmdecl relies on the same). The answer is cached on disk per
// toolchain, architecture and source, because every compile of an
// instrumented package needs it.
package goidoff

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/build"
	"go/importer"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-usdt/usdt/internal/diskcache"
)

// Offset returns the offset of g.goid for goarch in the runtime under
// goroot.
func Offset(goroot, goarch string) (int64, error) {
	offs, err := cached(goroot, goarch, "goid", []string{"g.goid"})
	if err != nil {
		return 0, err
	}
	return offs[0], nil
}

// P is where the runtime keeps the P a goroutine runs on: the word of
// runtime.g that points to its M, the word of runtime.m that points to
// its P, and runtime.p's 32-bit id. The in-process ring (internal/ring)
// gives each P a buffer of its own by that id. Procid is the word of
// runtime.m that holds its thread's id on Linux, which the ring records.
type P struct{ GM, MP, ID, Procid int64 }

// POffsets returns where the P's id is, for goarch in the runtime under
// goroot.
func POffsets(goroot, goarch string) (P, error) {
	offs, err := cached(goroot, goarch, "p", []string{"g.m", "m.p", "p.id", "m.procid"})
	if err != nil {
		return P{}, err
	}
	return P{offs[0], offs[1], offs[2], offs[3]}, nil
}

// cached returns the offsets of fields ("type.field"), from the disk
// cache when this toolchain's runtime was type-checked before.
func cached(goroot, goarch, name string, fields []string) ([]int64, error) {
	runtime2, err := os.ReadFile(filepath.Join(goroot, "src", "runtime", "runtime2.go"))
	if err != nil {
		return nil, fmt.Errorf("reading the runtime's source: %w", err)
	}
	version, _ := os.ReadFile(filepath.Join(goroot, "VERSION"))
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", goroot, goarch, version)
	h.Write(runtime2)
	key := name + "-" + hex.EncodeToString(h.Sum(nil)[:16])

	if data, ok := diskcache.Get(key); ok {
		if offs, err := parse(string(data), len(fields)); err == nil {
			return offs, nil
		}
	}
	offs, err := compute(goroot, goarch, fields)
	if err != nil {
		return nil, err
	}
	var text []string
	for _, o := range offs {
		text = append(text, strconv.FormatInt(o, 10))
	}
	diskcache.Put(key, []byte(strings.Join(text, " ")+"\n"))
	return offs, nil
}

func parse(text string, n int) ([]int64, error) {
	words := strings.Fields(text)
	if len(words) != n {
		return nil, fmt.Errorf("%d offsets cached, want %d", len(words), n)
	}
	offs := make([]int64, n)
	for i, w := range words {
		var err error
		if offs[i], err = strconv.ParseInt(w, 10, 64); err != nil {
			return nil, err
		}
	}
	return offs, nil
}

// compute type-checks the runtime and returns the offsets of fields,
// each a word-sized integer or pointer but p.id, an int32.
func compute(goroot, goarch string, fields []string) ([]int64, error) {
	ctxt := build.Default
	ctxt.GOROOT = goroot
	ctxt.GOARCH = goarch
	ctxt.GOOS = "linux"
	ctxt.CgoEnabled = false
	saved := build.Default
	// The source importer reads build.Default; restore it for the caller.
	build.Default = ctxt
	defer func() { build.Default = saved }()

	pkg, err := importer.ForCompiler(token.NewFileSet(), "source", nil).Import("runtime")
	if err != nil {
		return nil, fmt.Errorf("type-checking the runtime: %w", err)
	}
	sizes := types.SizesFor("gc", goarch)
	if sizes == nil {
		return nil, fmt.Errorf("unknown GOARCH %s", goarch)
	}
	offs := make([]int64, len(fields))
	for i, name := range fields {
		typ, field, _ := strings.Cut(name, ".")
		if offs[i], err = offsetOf(pkg, sizes, typ, field); err != nil {
			return nil, err
		}
	}
	return offs, nil
}

// offsetOf is the offset of runtime.typ's field, which must be a 64-bit
// word (a 32-bit one for p.id): assembly loads it with one instruction.
func offsetOf(pkg *types.Package, sizes types.Sizes, typ, field string) (int64, error) {
	obj := pkg.Scope().Lookup(typ)
	if obj == nil {
		return 0, fmt.Errorf("runtime has no type %s", typ)
	}
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		return 0, fmt.Errorf("runtime.%s is not a struct", typ)
	}
	fields := make([]*types.Var, st.NumFields())
	for i := range fields {
		fields[i] = st.Field(i)
	}
	want := int64(8)
	if typ == "p" {
		want = 4
	}
	offsets := sizes.Offsetsof(fields)
	for i, f := range fields {
		if f.Name() == field {
			if size := sizes.Sizeof(f.Type()); size != want {
				return 0, fmt.Errorf("runtime.%s.%s is %s, %d bytes, not %d", typ, field, f.Type(), size, want)
			}
			return offsets[i], nil
		}
	}
	return 0, fmt.Errorf("runtime.%s has no %s field", typ, field)
}
