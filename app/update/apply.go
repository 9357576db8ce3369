package update

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Release files the updater reads next to the binaries of a release.
const (
	SumsName      = "SHA256SUMS"     // "<sha256 hex>  <asset name>" lines, as sha256sum writes them
	SignatureName = "SHA256SUMS.sig" // Ed25519 signature over the SHA256SUMS bytes: raw 64 bytes or their standard base64
)

// AssetName is the release asset built for this OS and architecture, for
// example backstop-linux-amd64.
func AssetName() string { return "backstop-" + runtime.GOOS + "-" + runtime.GOARCH }

// Verification errors. They are stable strings: the updater stores them as
// version.maintenance.error.
var (
	ErrBadSignature = errors.New("update: the signature of SHA256SUMS does not verify with the release key")
	ErrNoChecksum   = errors.New("update: SHA256SUMS has no line for the asset")
	ErrChecksum     = errors.New("update: the asset does not match its SHA256SUMS line")
)

// Verify checks a downloaded asset: first the Ed25519 signature sig over the
// exact bytes of sums with pub, then that sums holds exactly one line for
// assetName whose hash is the SHA-256 of asset. The signature is checked
// first so that nothing of an unsigned SHA256SUMS is trusted. sig is the raw
// 64-byte signature or its standard base64 encoding (a trailing newline is
// allowed). It returns nil only when both hold.
func Verify(asset, sums, sig []byte, pub ed25519.PublicKey, assetName string) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("update: release key has %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	raw, err := decodeSignature(sig)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, sums, raw) {
		return ErrBadSignature
	}
	want, err := sumFor(sums, assetName)
	if err != nil {
		return err
	}
	got := sha256.Sum256(asset)
	if !bytes.Equal(got[:], want) {
		return ErrChecksum
	}
	return nil
}

func decodeSignature(sig []byte) ([]byte, error) {
	if len(sig) == ed25519.SignatureSize {
		return sig, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig)))
	if err != nil || len(raw) != ed25519.SignatureSize {
		return nil, ErrBadSignature
	}
	return raw, nil
}

// sumFor finds the hash of name in a sha256sum-style file. Both the text
// ("  name") and binary (" *name") markers are accepted; two lines for the
// same name are refused as ambiguous.
func sumFor(sums []byte, name string) ([]byte, error) {
	var found []byte
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		hexSum, file, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		file = strings.TrimPrefix(strings.TrimLeft(file, " "), "*")
		if file != name {
			continue
		}
		sum, err := hex.DecodeString(hexSum)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("update: SHA256SUMS line for %s is malformed", name)
		}
		if found != nil {
			return nil, fmt.Errorf("update: SHA256SUMS has two lines for %s", name)
		}
		found = sum
	}
	if found == nil {
		return nil, ErrNoChecksum
	}
	return found, nil
}

// PreviousPath is where Replace keeps the binary it replaces.
func PreviousPath(exePath string) string { return exePath + ".previous" }

// Replace installs newBinary at exePath atomically: it writes exePath.new in
// the same directory, fsyncs it, makes it 0755, keeps the current binary as
// exePath.previous (a hard link, or a copy where links are not possible) and
// renames exePath.new over exePath, then fsyncs the directory. A running
// process keeps executing the old inode. On error exePath is unchanged and
// exePath.new is removed.
func Replace(exePath string, newBinary []byte) error {
	tmp := exePath + ".new"
	if err := writeSynced(tmp, newBinary); err != nil {
		os.Remove(tmp)
		return err
	}
	prev := PreviousPath(exePath)
	os.Remove(prev)
	if err := os.Link(exePath, prev); err != nil {
		cur, rerr := os.ReadFile(exePath)
		if rerr != nil {
			os.Remove(tmp)
			return fmt.Errorf("update: keeping the previous binary: %w", rerr)
		}
		if werr := writeSynced(prev, cur); werr != nil {
			os.Remove(tmp)
			return fmt.Errorf("update: keeping the previous binary: %w", werr)
		}
	}
	if err := os.Rename(tmp, exePath); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("update: installing the new binary: %w", err)
	}
	return syncDir(filepath.Dir(exePath))
}

// Rollback puts exePath.previous back at exePath atomically (a copy renamed
// over exePath, so the previous file stays for another attempt).
func Rollback(exePath string) error {
	prev, err := os.ReadFile(PreviousPath(exePath))
	if err != nil {
		return fmt.Errorf("update: reading the previous binary: %w", err)
	}
	tmp := exePath + ".rollback"
	if err := writeSynced(tmp, prev); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, exePath); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("update: restoring the previous binary: %w", err)
	}
	return syncDir(filepath.Dir(exePath))
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("update: writing %s: %w", path, err)
	}
	if err := f.Chmod(0o755); err != nil {
		f.Close()
		return fmt.Errorf("update: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("update: syncing %s: %w", path, err)
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("update: syncing %s: %w", dir, err)
	}
	return nil
}
