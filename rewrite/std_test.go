package rewrite_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-usdt/usdt/rewrite"
)

// stdConfigs returns the configurations the compile step would pass for
// the standard packages patterns name, built without cgo: their Go files, and one import
// configuration naming the export data of every package they depend on,
// which go list builds.
func stdConfigs(tb testing.TB, patterns ...string) []rewrite.Config {
	tb.Helper()
	// Without cgo, GoFiles are what the compiler gets.
	goList := func(args ...string) ([]byte, error) {
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.Output()
	}
	want, err := goList(patterns...)
	if err != nil {
		tb.Fatalf("go list %v: %v", patterns, err)
	}
	out, err := goList(append([]string{"-deps", "-export", "-json=ImportPath,Dir,GoFiles,Export,ImportMap"}, patterns...)...)
	if err != nil {
		tb.Fatalf("go list -deps %v: %v", patterns, err)
	}
	selected := bytes.Fields(want)
	importCfg := filepath.Join(tb.TempDir(), "importcfg")
	var cfgs []rewrite.Config
	var lines []byte
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p struct {
			ImportPath, Dir, Export string
			GoFiles                 []string
			ImportMap               map[string]string
		}
		if err := dec.Decode(&p); err != nil {
			tb.Fatal(err)
		}
		lines = fmt.Appendf(lines, "packagefile %s=%s\n", p.ImportPath, p.Export)
		// The standard library vendors each path under one name.
		for from, to := range p.ImportMap {
			lines = fmt.Appendf(lines, "importmap %s=%s\n", from, to)
		}
		if !slices.ContainsFunc(selected, func(s []byte) bool { return string(s) == p.ImportPath }) {
			continue
		}
		cfg := rewrite.Config{ImportPath: p.ImportPath, ImportCfg: importCfg, GOARCH: "amd64", GoidOffset: 152}
		for _, f := range p.GoFiles {
			cfg.Files = append(cfg.Files, filepath.Join(p.Dir, f))
		}
		cfgs = append(cfgs, cfg)
	}
	if err := os.WriteFile(importCfg, lines, 0o644); err != nil {
		tb.Fatal(err)
	}
	return cfgs
}
