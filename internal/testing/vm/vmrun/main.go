// Command vmrun runs one command in a test VM of package vm, for scripts
// (benchmarks on other kernels) and for looking around by hand:
//
//	go run ./internal/testing/vm/vmrun [-kernel NAME] [-dir DIR] [-timeout D] -- COMMAND [ARG...]
//
// NAME is a kernel of the image cache as package vm names it (6.1-amd64;
// -list lists them). DIR, shared read-write and mounted at the same path
// inside, is the command's working directory (default: the current one).
// The command runs as root in the VM's Debian root with /usr/bin on PATH;
// its output is printed and its exit status is vmrun's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-usdt/usdt/internal/testing/vm"
)

func main() {
	kernel := flag.String("kernel", "6.1-amd64", "the kernel to boot, as -list names it")
	dir := flag.String("dir", ".", "the directory shared read-write, the command's working directory")
	timeout := flag.Duration("timeout", 30*time.Minute, "how long the machine may run")
	list := flag.Bool("list", false, "list the kernels of the cache")
	console := flag.Bool("console", false, "print the kernel's console too, not only the command's output")
	flag.Parse()
	ks, err := vm.Kernels()
	if err != nil {
		if len(ks) == 0 {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err) // the others boot
	}
	if *list {
		for _, k := range ks {
			fmt.Printf("%-12s %s\n", k.Name(), k.Release)
		}
		return
	}
	if flag.NArg() == 0 {
		fail(fmt.Errorf("no command: vmrun [-kernel NAME] [-dir DIR] -- COMMAND [ARG...]"))
	}
	var k *vm.Kernel
	for i := range ks {
		if ks[i].Name() == *kernel {
			k = &ks[i]
		}
	}
	if k == nil {
		fail(fmt.Errorf("no kernel %s in %s (vmrun -list lists them)", *kernel, vm.CacheDir()))
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	job := vm.Job{
		WorkDir: abs,
		Command: flag.Args(),
		Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8"},
	}
	if *console {
		job.Console = os.Stderr
	}
	res, err := vm.Run(ctx, vm.Machine{Kernel: *k, Root: vm.Root(k.Arch)}, job)
	if !*console {
		os.Stdout.WriteString(res.Output)
	}
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "vmrun: %s (%s) ran the command in %v\n", k.Release, res.Accel, res.Boot.Round(time.Millisecond))
	os.Exit(res.ExitCode)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "vmrun:", err)
	os.Exit(2)
}
