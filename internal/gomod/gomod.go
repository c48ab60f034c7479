// Package gomod answers, without running the go command, the two questions
// the tool asks of a module's layout: where the module (or workspace) root
// above a directory is, and what import path a directory has.
package gomod

import (
	"os"
	"path/filepath"
	"strings"
)

// Root walks up from the directory dir to the first directory holding the
// file name (go.mod, go.work), as the go command does to find the main
// module or workspace, and returns it, or "" at the root of the file system.
func Root(dir, name string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// ImportPath derives dir's import path from the nearest go.mod above it.
// It returns "" outside a module.
func ImportPath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	root := Root(abs, "go.mod")
	if root == "" {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return ""
	}
	mod := modulePath(data)
	if mod == "" {
		return ""
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == "." {
		return mod
	}
	return mod + "/" + filepath.ToSlash(rel)
}

func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			rest, _, _ = strings.Cut(rest, "//") // a trailing comment
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Requires returns the module paths that the go.mod file at path requires:
// since Go 1.17 a module's go.mod lists every module that provides a
// package of its build. It returns nil for a file that cannot be read.
func Requires(path string) []string {
	return firstArgs(path, "require")
}

// Uses returns the directories that the go.work file at path uses, each a
// main module of the workspace, absolute. It returns nil for a file that
// cannot be read.
func Uses(path string) []string {
	dirs := firstArgs(path, "use")
	for i, d := range dirs {
		if !filepath.IsAbs(d) {
			dirs[i] = filepath.Join(filepath.Dir(path), d)
		}
	}
	return dirs
}

// firstArgs returns the first argument of each verb directive of a go.mod
// or go.work file, single ("require a v1") or in a block ("require (").
func firstArgs(path, verb string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var args []string
	block := false
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case block && fields[0] == ")":
			block = false
		case block:
			args = append(args, strings.Trim(fields[0], `"`))
		case fields[0] == verb && len(fields) > 1 && fields[1] == "(":
			block = true
		case fields[0] == verb && len(fields) > 1:
			args = append(args, strings.Trim(fields[1], `"`))
		}
	}
	return args
}
