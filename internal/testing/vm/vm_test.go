package vm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-usdt/usdt/internal/testing/tracetest"
)

// TestCpio checks the archive with GNU cpio, which reads the newc format
// as the kernel does.
func TestCpio(t *testing.T) {
	tracetest.Require(t, "cpio")
	files := []cpioFile{
		{name: "dev", mode: modeDir | 0o755},
		{name: "dev/console", mode: modeChar | 0o600, rdev: [2]uint32{5, 1}},
		{name: "init", mode: modeReg | 0o755, data: []byte("#!/bin/sh\n")},
		{name: "odd", mode: modeReg | 0o644, data: []byte("12345")},
	}
	path := filepath.Join(t.TempDir(), "a.cpio")
	if err := writeCpioFile(path, files); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "cpio -itv < "+path).CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -t: %v\n%s", err, out)
	}
	for _, want := range []string{`drwxr-xr-x .* dev\n`, `crw------- .* 5, +1 .* dev/console\n`, `-rwxr-xr-x .* 10 .* init\n`, `-rw-r--r-- .* 5 .* odd\n`} {
		if !regexp.MustCompile(want).MatchString(string(out)) {
			t.Errorf("cpio -tv does not list %q:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "cpio -id --no-absolute-filenames < "+path+" odd init")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	for _, f := range files[2:] {
		if b, err := os.ReadFile(filepath.Join(dir, f.name)); err != nil || string(b) != string(f.data) {
			t.Errorf("%s unpacked as %q, %v; want %q", f.name, b, err, f.data)
		}
	}
}

// cachedKernels returns the kernels of the cache. Without any, t skips;
// for each Expected one missing, a subtest named after it skips; both
// fail in CI instead, saying how to build the images
// (tracetest.SkipMissing).
func cachedKernels(t *testing.T) []Kernel {
	t.Helper()
	ks, err := Kernels()
	var missing *MissingError
	switch {
	case errors.As(err, &missing):
		for _, name := range missing.Missing {
			t.Run(name, func(t *testing.T) { tracetest.SkipMissing(t, "%v", err) })
		}
	case err != nil:
		tracetest.SkipMissing(t, "%v", err)
	}
	return ks
}

// TestKernelsMissing checks that Kernels names the Expected kernels a
// cache lacks, and still lists those it holds.
func TestKernelsMissing(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("USDT_VM_CACHE", cache)
	if ks, err := Kernels(); !errors.Is(err, ErrNoImages) || len(ks) != 0 {
		t.Errorf("an empty cache: %v, %v; want no kernel and ErrNoImages", ks, err)
	}
	for dir, release := range map[string]string{"bookworm-amd64": "6.1.0-56-amd64", "bullseye-amd64": "5.10.0-46-amd64"} {
		if err := os.MkdirAll(filepath.Join(cache, "kernels", dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cache, "kernels", dir, "release"), []byte(release+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ks, err := Kernels()
	var missing *MissingError
	if !errors.As(err, &missing) || !slices.Equal(missing.Missing, []string{"6.1-arm64"}) {
		t.Errorf("without 6.1-arm64: error %v, want a MissingError naming it", err)
	}
	var names []string
	for _, k := range ks {
		names = append(names, k.Name())
	}
	if want := []string{"5.10-amd64", "6.1-amd64"}; !slices.Equal(names, want) {
		t.Errorf("kernels %v, want %v", names, want)
	}
}

// TestModuleOrder reads the dependencies of the cached kernels' 9p
// modules: each module comes after the ones modinfo says it depends on.
func TestModuleOrder(t *testing.T) {
	for _, k := range cachedKernels(t) {
		t.Run(k.Name(), func(t *testing.T) {
			order, err := moduleOrder(k.Modules, guestModules)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range order {
				names = append(names, canonicalModule(strings.TrimSuffix(filepath.Base(p), ".ko")))
			}
			for _, want := range [][2]string{{"9pnet", "9pnet_virtio"}, {"9pnet", "9p"}, {"virtio_pci", "9pnet_virtio"}} {
				i, j := slices.Index(names, want[0]), slices.Index(names, want[1])
				if j >= 0 && (i < 0 || i > j) {
					t.Errorf("%s loads before %s, on which it depends: %v", want[1], want[0], names)
				}
			}
			if !slices.Contains(names, "9p") {
				t.Errorf("no 9p module in %v", names)
			}
		})
	}
}

// TestBoot boots every cached kernel with its root and runs a command that
// reports the kernel's release and writes into the shared directory.
func TestBoot(t *testing.T) {
	for _, k := range cachedKernels(t) {
		t.Run(k.Name(), func(t *testing.T) {
			tracetest.Require(t, map[string]string{"amd64": "qemu-system-x86_64", "arm64": "qemu-system-aarch64"}[k.Arch])
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := Run(ctx, Machine{Kernel: k, Root: Root(k.Arch)}, Job{
				WorkDir: dir,
				Command: []string{"/bin/sh", "-c", "uname -r; uname -m; echo written > out; exit 3"},
				Env:     []string{"PATH=/usr/bin:/bin"},
			})
			if err != nil {
				t.Fatalf("%v\n%s", err, res.Output)
			}
			machine := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[k.Arch]
			if want := k.Release + "\n" + machine + "\n"; res.Output != want {
				t.Errorf("the guest printed %q, want %q", res.Output, want)
			}
			if res.ExitCode != 3 {
				t.Errorf("exit code %d, want 3", res.ExitCode)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(b) != "written\n" {
				t.Errorf("the shared directory holds %q, %v", b, err)
			}
			t.Logf("%s booted with %s, ran and powered off in %v", k.Release, res.Accel, res.Boot.Round(time.Millisecond))
		})
	}
}
