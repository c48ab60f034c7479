// Command vminit is the init of the test VMs that package vm boots: it
// loads the modules virtio-9p needs, mounts the root the host shares
// read-only (with a writable /tmp and the kernel's file systems), mounts
// the read-write share where the host said, runs the one command of
// vm.GuestConfig in it, and powers the machine off. It is built static
// for the guest's architecture and is the whole initramfs with the
// modules.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/go-usdt/usdt/internal/testing/vm"
)

const newRoot = "/newroot"

func main() {
	err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vminit:", err)
	}
	unix.Sync()
	// Powering off ends qemu (it runs with -no-reboot); if that fails
	// the kernel panics when init exits, which ends qemu too.
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func run() error {
	for _, m := range []struct{ typ, dir string }{{"devtmpfs", "/dev"}, {"proc", "/proc"}, {"sysfs", "/sys"}} {
		if err := mount(m.typ, m.typ, m.dir, 0, ""); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(vm.ConfigPath)
	if err != nil {
		return err
	}
	var cfg vm.GuestConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %v", vm.ConfigPath, err)
	}
	if len(cfg.Command) == 0 {
		fmt.Println("vminit: booted, no command")
		return nil
	}
	for _, path := range cfg.Modules {
		if err := loadModule(path); err != nil {
			return err
		}
	}
	// A large msize: 9p's default of 8 KiB makes reading bpftrace's
	// libraries take seconds under emulation.
	const p9 = "trans=virtio,version=9p2000.L,msize=512000"
	if err := mount(vm.RootTag, "9p", newRoot, unix.MS_RDONLY, p9+",cache=loose"); err != nil {
		return err
	}
	for _, m := range []struct{ typ, dir string }{
		{"proc", "/proc"}, {"sysfs", "/sys"}, {"devtmpfs", "/dev"},
		{"tmpfs", "/tmp"}, {"tmpfs", "/run"}, {"tmpfs", "/var/tmp"},
		{"tracefs", "/sys/kernel/tracing"}, {"debugfs", "/sys/kernel/debug"},
		{"bpf", "/sys/fs/bpf"},
	} {
		if err := mount(m.typ, m.typ, newRoot+m.dir, 0, ""); err != nil {
			return err
		}
	}
	work := filepath.Join(newRoot, cfg.WorkDir)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if err := mount(vm.WorkTag, "9p", work, 0, p9); err != nil {
		return err
	}
	if err := unix.Chroot(newRoot); err != nil {
		return fmt.Errorf("chroot: %v", err)
	}
	if err := os.Chdir(cfg.WorkDir); err != nil {
		return err
	}
	status, err := command(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.WorkDir, vm.ExitFile), []byte(strconv.Itoa(status)+"\n"), 0o644)
}

// command runs the config's command and returns its exit status.
func command(cfg vm.GuestConfig) (int, error) {
	log, err := os.Create(filepath.Join(cfg.WorkDir, vm.OutputFile))
	if err != nil {
		return 0, err
	}
	defer log.Close()
	out := io.MultiWriter(os.Stdout, log)
	// exec.Command looks the command up in this process's PATH.
	for _, kv := range cfg.Env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", path)
		}
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = cfg.Env, out, out
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		// As a shell reports a command it cannot run.
		fmt.Fprintln(out, "vminit:", err)
		return 127, nil
	}
	return 0, nil
}

func mount(source, typ, dir string, flags uintptr, data string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil && !errors.Is(err, unix.EROFS) {
		return err
	}
	if err := unix.Mount(source, dir, typ, flags, data); err != nil {
		return fmt.Errorf("mount -t %s %s %s: %v", typ, source, dir, err)
	}
	return nil
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("loading %s: %v", filepath.Base(path), err)
	}
	return nil
}
