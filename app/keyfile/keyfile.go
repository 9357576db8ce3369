// Package keyfile keeps the appliance's secret keys in the data directory:
// random bytes in a file of mode 0600, created once and never replaced.
package keyfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Load returns the key in dir/name, creating it with size random bytes on
// first use. Creation writes a temporary file, syncs it and links it into
// place (a link, not a rename: it never replaces a key another process just
// made; that key is then used) and syncs the directory. A key of another
// size is an error.
func Load(dir, name string, size int) ([]byte, error) {
	path := filepath.Join(dir, name)
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = create(dir, name, size)
	}
	if err != nil {
		return nil, err
	}
	if len(key) != size {
		return nil, fmt.Errorf("%s: %d bytes, want %d", path, len(key), size)
	}
	return key, nil
}

func create(dir, name string, size int) ([]byte, error) {
	key := make([]byte, size)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(key)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	} else if err != nil {
		return nil, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return key, d.Sync()
}
