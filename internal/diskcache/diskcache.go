// Package diskcache keeps answers that cost more to compute than to read
// (a tool's version, the goroutine id's offset, a compile's output) in
// usdt-toolexec's directory of the user's cache, where every build asks
// for them again.
package diskcache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
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

// Touch marks the entry under key as used now, for Remove.
func Touch(key string) {
	if p := path(key); p != "" {
		now := time.Now()
		os.Chtimes(p, now, now)
	}
}

// Due reports whether marker is older than every, or missing, and marks
// it done now: for work to do once in a while, such as Remove.
func Due(marker string, every time.Duration) bool {
	p := path(marker)
	if p == "" {
		return false
	}
	if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) < every {
		return false
	}
	Put(marker, nil)
	return true
}

// Remove removes the entries whose keys start with prefix that nothing
// put or touched for age.
func Remove(prefix string, age time.Duration) {
	dir := path("")
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > age {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
