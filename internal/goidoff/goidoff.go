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
	runtime2, err := os.ReadFile(filepath.Join(goroot, "src", "runtime", "runtime2.go"))
	if err != nil {
		return 0, fmt.Errorf("reading the runtime's source: %w", err)
	}
	version, _ := os.ReadFile(filepath.Join(goroot, "VERSION"))
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", goroot, goarch, version)
	h.Write(runtime2)
	key := hex.EncodeToString(h.Sum(nil)[:16])

	if data, ok := diskcache.Get("goid-" + key); ok {
		if off, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			return off, nil
		}
	}
	off, err := compute(goroot, goarch)
	if err != nil {
		return 0, err
	}
	diskcache.Put("goid-"+key, []byte(strconv.FormatInt(off, 10)+"\n"))
	return off, nil
}

func compute(goroot, goarch string) (int64, error) {
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
		return 0, fmt.Errorf("type-checking the runtime: %w", err)
	}
	obj := pkg.Scope().Lookup("g")
	if obj == nil {
		return 0, fmt.Errorf("runtime has no type g")
	}
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		return 0, fmt.Errorf("runtime.g is not a struct")
	}
	fields := make([]*types.Var, st.NumFields())
	for i := range fields {
		fields[i] = st.Field(i)
	}
	sizes := types.SizesFor("gc", goarch)
	if sizes == nil {
		return 0, fmt.Errorf("unknown GOARCH %s", goarch)
	}
	offsets := sizes.Offsetsof(fields)
	for i, f := range fields {
		if f.Name() == "goid" {
			if b, ok := f.Type().Underlying().(*types.Basic); !ok || sizes.Sizeof(b) != 8 {
				return 0, fmt.Errorf("runtime.g.goid is %s, not a 64-bit integer", f.Type())
			}
			return offsets[i], nil
		}
	}
	return 0, fmt.Errorf("runtime.g has no goid field")
}
