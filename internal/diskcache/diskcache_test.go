package diskcache

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPutGet(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	if _, ok := Get("k"); ok {
		t.Fatal("Get of a key never put found something")
	}
	Put("k", []byte("answer\n"))
	if data, ok := Get("k"); !ok || string(data) != "answer\n" {
		t.Fatalf("Get = %q, %v; want the answer put", data, ok)
	}
	// Nothing but the answer is left behind.
	entries, err := os.ReadDir(filepath.Join(home, "usdt-toolexec"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "k" {
		t.Fatalf("cache directory holds %v (%v), want just k", entries, err)
	}
}
