// Package diskcache keeps small answers that cost more to compute than to
// read (a tool's version, the goroutine id's offset) in usdt-toolexec's
// directory of the user's cache, where every build asks for them again.
package diskcache

import (
	"fmt"
	"os"
	"path/filepath"
)

func path(key string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "usdt-toolexec", key)
}

// Get returns what Put stored under key, if anything.
func Get(key string) ([]byte, bool) {
	p := path(key)
	if p == "" {
		return nil, false
	}
	data, err := os.ReadFile(p)
	return data, err == nil
}

// Put stores data under key. It is written whole under a unique name, then
// renamed, so that concurrent builds never read a partial answer. Errors
// are dropped: a lost race or a read-only cache only costs the next build
// the same computation.
func Put(key string, data []byte) {
	p := path(key)
	if p == "" || os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	tmp := fmt.Sprintf("%s.%d", p, os.Getpid())
	if os.WriteFile(tmp, data, 0o644) == nil {
		os.Rename(tmp, p)
	}
}
