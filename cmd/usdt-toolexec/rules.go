package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync"

	"github.com/go-usdt/usdt/rules"
)

var (
	rulesOnce   sync.Once
	loadedRules *rules.Rules
	rulesErr    error
)

// goCommandDir is where the go command runs. The compiler runs in each
// package's directory, but a relative -rules path, $USDT_RULES and the
// main module's usdt.yml all mean the user's directory, which is the
// working directory of this process's parent: the go command.
func goCommandDir() string {
	if dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", os.Getppid())); err == nil {
		return dir
	}
	dir, _ := os.Getwd()
	return dir
}

// loadRules finds and loads the rules once per process; nil without a
// rules file.
func loadRules(opt options) (*rules.Rules, error) {
	rulesOnce.Do(func() {
		path, err := rules.Locate(opt.rules, goCommandDir())
		if err != nil || path == "" {
			rulesErr = err
			return
		}
		loadedRules, rulesErr = rules.Load(path)
	})
	return loadedRules, rulesErr
}

// rulesIdentity is part of the tool identity: editing the rules must
// invalidate every cached compile and link.
func rulesIdentity(opt options) (string, error) {
	r, err := loadRules(opt)
	if err != nil || r == nil {
		return "none", err
	}
	data, err := os.ReadFile(r.File)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}
