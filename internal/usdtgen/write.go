package usdtgen

import (
	"bytes"
	"errors"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// Write puts files into dir. A file whose content is already there is left
// alone, so unchanged input keeps modification times and build caches warm.
// Every file is written to a temporary name first, and the renames happen
// only once all were written: a failure leaves no half-written output.
func Write(dir string, files []File) (changed []string, err error) {
	type pending struct{ tmp, dst string }
	var todo []pending
	defer func() {
		for _, p := range todo {
			os.Remove(p.tmp)
		}
	}()
	for _, f := range files {
		dst := filepath.Join(dir, f.Name)
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		tmp, err := os.CreateTemp(dir, "."+f.Name+".*")
		if err != nil {
			return nil, err
		}
		todo = append(todo, pending{tmp.Name(), dst})
		_, werr := tmp.Write(f.Data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
			return nil, err
		}
	}
	for len(todo) > 0 {
		p := todo[0]
		if err := os.Rename(p.tmp, p.dst); err != nil {
			return changed, err
		}
		changed = append(changed, filepath.Base(p.dst))
		todo = todo[1:]
	}
	return changed, nil
}

// PackageName finds the package name of the Go files in dir, ignoring
// tests and usdtgen's own output (which may be stale).
func PackageName(dir string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	fallback := ""
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") || strings.Contains(filepath.Base(m), "_usdt_") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, parser.PackageClauseOnly)
		if err != nil {
			continue
		}
		// A file the build leaves out, such as a "//go:build ignore"
		// generator in package main, need not be in the package; it counts
		// only when nothing else is there (files for other platforms).
		if ok, err := build.Default.MatchFile(dir, filepath.Base(m)); err == nil && ok {
			return f.Name.Name, nil
		}
		if fallback == "" {
			fallback = f.Name.Name
		}
	}
	if fallback != "" {
		return fallback, nil
	}
	return "", fmt.Errorf("no Go files in %s to take the package name from\n\thint: pass -pkg NAME", dir)
}
