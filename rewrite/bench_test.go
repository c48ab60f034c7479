package rewrite_test

import (
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
	for _, cfg := range stdConfigs(b, "encoding/json", "go/types", "net/http") {
		b.Run(cfg.ImportPath, func(b *testing.B) {
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
