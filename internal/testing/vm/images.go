package vm

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CacheDir is where scripts/vm-images.sh keeps the kernels and roots:
// $USDT_VM_CACHE, default /var/cache/go-usdt/vm.
func CacheDir() string {
	if d := os.Getenv("USDT_VM_CACHE"); d != "" {
		return d
	}
	return "/var/cache/go-usdt/vm"
}

// Kernels lists the kernels of the cache, each a directory of
// CacheDir()/kernels holding vmlinuz, its release in a file named release,
// and lib/modules/RELEASE; oldest first within each architecture.
func Kernels() ([]Kernel, error) {
	dirs, err := filepath.Glob(filepath.Join(CacheDir(), "kernels", "*", "release"))
	if err != nil {
		return nil, err
	}
	var ks []Kernel
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel := strings.TrimSpace(string(b))
		dir := filepath.Dir(f)
		k := Kernel{Release: rel, Image: filepath.Join(dir, "vmlinuz"), Modules: filepath.Join(dir, "lib", "modules", rel)}
		switch {
		case strings.HasSuffix(rel, "-amd64"):
			k.Arch = "amd64"
		case strings.HasSuffix(rel, "-arm64"):
			k.Arch = "arm64"
		default:
			continue
		}
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		return nil, ErrNoImages
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].Arch != ks[j].Arch {
			return ks[i].Arch < ks[j].Arch
		}
		return versionLess(ks[i].Release, ks[j].Release)
	})
	return ks, nil
}

// Root is the Debian root directory of arch in the cache.
func Root(arch string) string {
	return filepath.Join(CacheDir(), "bookworm-"+arch)
}

// versionLess orders kernel releases by their numeric parts.
func versionLess(a, b string) bool {
	as, bs := strings.FieldsFunc(a, notDigit), strings.FieldsFunc(b, notDigit)
	for i := range min(len(as), len(bs)) {
		if len(as[i]) != len(bs[i]) {
			return len(as[i]) < len(bs[i])
		}
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}

func notDigit(r rune) bool { return r < '0' || r > '9' }
