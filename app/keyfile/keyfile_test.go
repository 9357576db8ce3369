package keyfile

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestLoadCreatesOnceAndKeeps(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := Load(dir, "test.key", 32)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !bytes.Equal(k, keys[0]) {
			t.Fatal("concurrent first loads returned different keys")
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "test.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d files left, want the key only", len(entries))
	}
	if _, err := Load(dir, "test.key", 16); err == nil {
		t.Fatal("a key of the wrong size was accepted")
	}
}
