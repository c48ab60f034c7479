package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// Expected names, as Kernel.Name does, the kernels scripts/vm-images.sh
// builds, each into a directory CacheDir()/kernels/SUITE-ARCH: Debian
// 11's 5.10 (bullseye-amd64) and Debian 12's 6.1 (bookworm-amd64 and
// bookworm-arm64). TestKernels boots each; Kernels reports the ones
// missing, so that a kernel whose download failed cannot drop out of the
// matrix unseen.
var Expected = []string{"5.10-amd64", "6.1-amd64", "6.1-arm64"}

// MissingError is Kernels' error when the cache lacks some of the
// Expected kernels but not all.
type MissingError struct {
	Dir     string   // the cache's directory
	Missing []string // the Expected names it lacks
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("no VM image of kernel %s in %s: run scripts/vm-images.sh (make vm-images), and see why it failed to build it",
		strings.Join(e.Missing, ", "), e.Dir)
}

// Kernels lists the kernels of the cache, each a directory of
// CacheDir()/kernels holding vmlinuz, its release in a file named release,
// and lib/modules/RELEASE; oldest first within each architecture. With
// none, the error is ErrNoImages; when some of the Expected kernels are
// missing, it returns those it found and a *MissingError naming the rest.
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
		return nil, fmt.Errorf("%w (%s holds no kernel)", ErrNoImages, filepath.Join(CacheDir(), "kernels"))
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].Arch != ks[j].Arch {
			return ks[i].Arch < ks[j].Arch
		}
		return versionLess(ks[i].Release, ks[j].Release)
	})
	var missing []string
	for _, name := range Expected {
		if !slices.ContainsFunc(ks, func(k Kernel) bool { return k.Name() == name }) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return ks, &MissingError{Dir: CacheDir(), Missing: missing}
	}
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
