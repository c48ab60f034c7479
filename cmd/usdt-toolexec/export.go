package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"syscall"
)

// exporter is the command that traces with -otlp and -pprof: their
// exporters stay out of this binary, which every compile of an
// instrumented build starts (see docs/design.md, "Calls as spans and
// profiles").
const exporter = "usdt-export"

// runExporter replaces this process with usdt-export, given args, trace's
// arguments: the process traced, its signals and its exit status stay
// those of the trace the user started.
func runExporter(args []string) error {
	path, err := findExporter()
	if err != nil {
		return err
	}
	return syscall.Exec(path, append([]string{path}, args...), os.Environ())
}

// findExporter finds usdt-export beside this executable, where go install
// puts both, else on $PATH.
func findExporter() (string, error) {
	// Linux's os.Executable is the file itself, symbolic links resolved.
	self, err := os.Executable()
	if err == nil {
		beside := filepath.Join(filepath.Dir(self), exporter)
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	if path, err := exec.LookPath(exporter); err == nil {
		return path, nil
	}
	hint := "go build -o DIR/ ./cmd/" + exporter + " in the checkout this usdt-toolexec was built from, DIR its directory"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		hint = "go install github.com/go-usdt/usdt/cmd/" + exporter + "@" + info.Main.Version + ", this usdt-toolexec's version"
	}
	return "", fmt.Errorf("-otlp and -pprof run %s, which is neither beside %s nor on $PATH\n\thint: %s; or, for go get -tool, go get -tool github.com/go-usdt/usdt/cmd/%s and go tool %s with trace's arguments", exporter, self, hint, exporter, exporter)
}
