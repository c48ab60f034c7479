package toolexec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
)

// vet runs go vet's analysis tool, which go test runs before every test.
// It type-checks the package from the files its JSON config lists, so it
// must see the same sentinel definition as the compiler.
func (inv Invocation) vet() error {
	args := inv.Args
	if len(args) == 0 || !strings.HasSuffix(args[len(args)-1], ".cfg") {
		return inv.run(inv.Tool, args...)
	}
	cfgPath := args[len(args)-1]
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return inv.run(inv.Tool, args...)
	}
	files, _ := cfg["GoFiles"].([]any)
	for _, f := range files {
		name, _ := f.(string)
		if !strings.HasSuffix(name, probe.NoCgoSuffix) {
			continue
		}
		dir := filepath.Dir(cfgPath)
		extra, err := writeSentinel(name, dir)
		if err != nil {
			return err
		}
		cfg["GoFiles"] = append(files, extra)
		out, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		newCfg := filepath.Join(dir, "usdt_vet.cfg")
		if err := os.WriteFile(newCfg, out, 0o644); err != nil {
			return err
		}
		args = append(append([]string{}, args[:len(args)-1]...), newCfg)
		break
	}
	return inv.run(inv.Tool, args...)
}
