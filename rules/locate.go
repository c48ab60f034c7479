package rules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-usdt/usdt/internal/gomod"
)

// EnvVar names the environment variable that points at a rules file when no
// flag does.
const EnvVar = "USDT_RULES"

// DefaultFile is the rules file looked for in the main module's root.
const DefaultFile = "usdt.yml"

// Locate finds the rules file and returns its absolute path:
//
//   - flagValue, if not empty;
//   - else $USDT_RULES, if set and not empty;
//   - else usdt.yml in the main module's root, the nearest directory at or
//     above dir holding a go.mod file (what `go env GOMOD` finds, without
//     running go; with GO111MODULE=off there is no module);
//   - else usdt.yml beside the go.work at or above dir, for workspaces.
//
// A relative flagValue or $USDT_RULES is taken relative to dir ("" means the
// current directory). A file named by the flag or the variable must exist:
// asking for rules and silently building without probes would be worse than
// failing. Without either, Locate returns "" and no error when the module has
// no usdt.yml, or when there is no module.
func Locate(flagValue, dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if flagValue != "" {
		return explicitFile(flagValue, absDir, "rules flag")
	}
	if env := os.Getenv(EnvVar); env != "" {
		return explicitFile(env, absDir, "$"+EnvVar)
	}
	if os.Getenv("GO111MODULE") == "off" {
		return "", nil
	}
	// In a workspace every module is a main module, so the rules of the
	// whole build sit beside go.work; a module's own usdt.yml still wins.
	for _, root := range []string{gomod.Root(absDir, "go.mod"), gomod.Root(absDir, "go.work")} {
		if root == "" {
			continue
		}
		path := filepath.Join(root, DefaultFile)
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return "", err
		case fi.IsDir():
			return "", fmt.Errorf("%s is a directory, not a rules file", path)
		}
		return path, nil
	}
	return "", nil
}

func explicitFile(name, dir, source string) (string, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("rules file from %s: %w", source, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("rules file from %s: %s is a directory", source, path)
	}
	return path, nil
}
