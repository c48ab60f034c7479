package rewrite_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-usdt/usdt/rewrite"
	"github.com/go-usdt/usdt/rules"
)

// BenchmarkPackage instruments every function of large standard packages
// as the compile step does, from parsing to the generated files: the
// wrapper's own share of a probed build, past its start-up.
func BenchmarkPackage(b *testing.B) {
	r, err := rules.Parse("bench.yml", []byte("provider: std\nrules:\n  - package: \"...\"\n"))
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"encoding/json", "go/types", "net/http"} {
		b.Run(path, func(b *testing.B) {
			cfg := stdPackage(b, path)
			cfg.Rules = r
			for b.Loop() {
				cfg.OutDir = b.TempDir()
				if _, err := rewrite.Package(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// stdPackage is the configuration the compile step would pass for a
// standard package: its Go files and an import configuration naming its
// dependencies' export data, which go list builds.
func stdPackage(b *testing.B, path string) rewrite.Config {
	out, err := exec.Command("go", "list", "-deps", "-export", "-json=ImportPath,Dir,GoFiles,Export,ImportMap", path).Output()
	if err != nil {
		b.Fatalf("go list %s: %v", path, err)
	}
	importCfg := filepath.Join(b.TempDir(), "importcfg")
	cfg := rewrite.Config{ImportPath: path, ImportCfg: importCfg, GOARCH: "amd64", GoidOffset: 152}
	var lines []byte
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p struct {
			ImportPath, Dir, Export string
			GoFiles                 []string
			ImportMap               map[string]string
		}
		if err := dec.Decode(&p); err != nil {
			b.Fatal(err)
		}
		if p.ImportPath != path {
			lines = fmt.Appendf(lines, "packagefile %s=%s\n", p.ImportPath, p.Export)
			continue
		}
		for from, to := range p.ImportMap {
			lines = fmt.Appendf(lines, "importmap %s=%s\n", from, to)
		}
		for _, f := range p.GoFiles {
			cfg.Files = append(cfg.Files, filepath.Join(p.Dir, f))
		}
	}
	if err := os.WriteFile(importCfg, lines, 0o644); err != nil {
		b.Fatal(err)
	}
	return cfg
}
