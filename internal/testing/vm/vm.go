package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kernel is one bootable kernel: Debian's image and its modules.
type Kernel struct {
	Release string // as uname -r says, such as 6.1.0-56-amd64
	Arch    string // GOARCH
	Image   string // the vmlinuz file
	Modules string // its lib/modules/RELEASE directory
}

// Name is the kernel's short name in test names and tables: its version
// and architecture, such as 6.1-amd64.
func (k Kernel) Name() string {
	v := k.Release
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	if parts := strings.Split(v, "."); len(parts) > 2 {
		v = parts[0] + "." + parts[1]
	}
	return v + "-" + k.Arch
}

// Machine is a kernel booted with a root directory of its architecture.
type Machine struct {
	Kernel Kernel
	Root   string // shared read-only as the guest's /
	// MemoryMB is the guest's memory; 0 means 2048.
	MemoryMB int
}

// Job is what a machine runs between boot and power-off.
type Job struct {
	// WorkDir is shared read-write and mounted at the same path inside.
	WorkDir string
	Command []string
	Env     []string
	// Console receives everything the guest prints, kernel included.
	Console io.Writer
}

// Result is how a job ended.
type Result struct {
	ExitCode int    // the command's
	Output   string // what the command printed
	Accel    string // kvm or tcg
	Boot     time.Duration
}

// Run boots m, runs job and waits for the machine to power off, or for
// ctx to end, which kills it. An error means the command did not run to
// its end: the machine failed to boot, crashed or timed out.
func Run(ctx context.Context, m Machine, job Job) (Result, error) {
	res := Result{Accel: Accel(m.Kernel.Arch)}
	initrd, err := initramfs(m.Kernel, job)
	if err != nil {
		return res, err
	}
	defer os.Remove(initrd)
	for _, f := range []string{OutputFile, ExitFile} {
		os.Remove(filepath.Join(job.WorkDir, f))
	}
	start := time.Now()
	err = qemu(ctx, m, initrd, res.Accel, job)
	res.Boot = time.Since(start)
	out, _ := os.ReadFile(filepath.Join(job.WorkDir, OutputFile))
	res.Output = string(out)
	if err != nil {
		return res, err
	}
	status, err := os.ReadFile(filepath.Join(job.WorkDir, ExitFile))
	if err != nil {
		return res, fmt.Errorf("the guest powered off without running the command to its end (see its console)")
	}
	res.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(status)))
	return res, err
}

// qemu runs the machine to its power-off.
func qemu(ctx context.Context, m Machine, initrd, accel string, job Job) error {
	mem := m.MemoryMB
	if mem == 0 {
		mem = 2048
	}
	var bin, console string
	var args []string
	switch m.Kernel.Arch {
	case "amd64":
		bin, console = "qemu-system-x86_64", "ttyS0"
		args = []string{"-cpu", "max"}
		if accel == "kvm" {
			args = []string{"-cpu", "host"}
		}
	case "arm64":
		bin, console = "qemu-system-aarch64", "ttyAMA0"
		// Emulated pointer authentication with QEMU's own cheap hash
		// rather than the architected one, which is several times slower
		// under TCG.
		args = []string{"-machine", "virt", "-cpu", "max,pauth-impdef=on"}
		if accel == "kvm" {
			args = []string{"-machine", "virt", "-cpu", "host"}
		}
	default:
		return fmt.Errorf("no qemu machine for %s", m.Kernel.Arch)
	}
	args = append(args,
		"-accel", accel, "-smp", strconv.Itoa(min(runtime.NumCPU(), 2)), "-m", strconv.Itoa(mem),
		"-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", m.Kernel.Image, "-initrd", initrd,
		"-append", "console="+console+" panic=-1 quiet",
		"-virtfs", "local,path="+m.Root+",mount_tag="+RootTag+",security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path="+job.WorkDir+",mount_tag="+WorkTag+",security_model=none",
	)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = job.Console, job.Console
	if job.Console == nil {
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", bin, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("%s: %v", bin, err)
	}
	return nil
}

// initramfs writes the init, its config and the modules of job into a
// new archive and returns its path.
func initramfs(k Kernel, job Job) (string, error) {
	init, err := buildInit(k.Arch)
	if err != nil {
		return "", err
	}
	mods, err := moduleOrder(k.Modules, guestModules)
	if err != nil {
		return "", err
	}
	cfg := GuestConfig{WorkDir: job.WorkDir, Command: job.Command, Env: job.Env}
	files := []cpioFile{
		{name: "dev", mode: modeDir | 0o755},
		{name: "dev/console", mode: modeChar | 0o600, rdev: [2]uint32{5, 1}},
		{name: "modules", mode: modeDir | 0o755},
		{name: "init", mode: modeReg | 0o755, data: init},
	}
	for _, path := range mods {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		name := "/modules/" + filepath.Base(path)
		cfg.Modules = append(cfg.Modules, name)
		files = append(files, cpioFile{name: name, mode: modeReg | 0o644, data: data})
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	files = append(files, cpioFile{name: ConfigPath, mode: modeReg | 0o644, data: js})
	f, err := os.CreateTemp("", "usdt-vm-initrd-*.cpio")
	if err != nil {
		return "", err
	}
	f.Close()
	return f.Name(), writeCpioFile(f.Name(), files)
}

var inits sync.Map // GOARCH -> func() ([]byte, error)

// buildInit builds package vminit, static, for arch; once per process.
func buildInit(arch string) ([]byte, error) {
	f, _ := inits.LoadOrStore(arch, sync.OnceValues(func() ([]byte, error) {
		dir, err := os.MkdirTemp("", "usdt-vminit-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "init")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/go-usdt/usdt/internal/testing/vm/vminit")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the VM's init for %s: %v\n%s", arch, err, out)
		}
		return os.ReadFile(bin)
	}))
	return f.(func() ([]byte, error))()
}

var accels sync.Map // GOARCH -> func() string

// Accel picks KVM for a guest of the host's architecture when a machine
// really boots with it (a /dev/kvm that opens may still hang a guest, as
// under some nested hypervisors), TCG otherwise.
func Accel(arch string) string {
	if arch != runtime.GOARCH {
		return "tcg"
	}
	f, _ := accels.LoadOrStore(arch, sync.OnceValue(func() string {
		kvm, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return "tcg"
		}
		kvm.Close()
		return kvmBoots(arch)
	}))
	return f.(func() string)()
}

// kvmBoots boots a machine with no command under KVM and reports kvm if
// it powers off in time.
func kvmBoots(arch string) string {
	// Any kernel of the arch will do; the caller's is not known here, so
	// the probe uses the cache's.
	k, _ := Kernels() // those there, if some are missing
	for _, kk := range k {
		if kk.Arch != arch {
			continue
		}
		dir, err := os.MkdirTemp("", "usdt-vm-kvm-")
		if err != nil {
			return "tcg"
		}
		defer os.RemoveAll(dir)
		job := Job{WorkDir: dir}
		initrd, err := initramfs(kk, job)
		if err != nil {
			return "tcg"
		}
		defer os.Remove(initrd)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := qemu(ctx, Machine{Kernel: kk, Root: "/", MemoryMB: 256}, initrd, "kvm", job); err != nil {
			return "tcg"
		}
		return "kvm"
	}
	return "tcg"
}

// ErrNoImages is returned when the cache holds no kernels:
// scripts/vm-images.sh makes them.
var ErrNoImages = errors.New("no VM images: run scripts/vm-images.sh (make vm-images)")
