package update

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func signedRelease(t *testing.T, asset []byte, name string) (sums, sig []byte, pub ed25519.PublicKey, priv ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(asset)
	other := sha256.Sum256([]byte("other"))
	sums = []byte(hex.EncodeToString(other[:]) + "  backstop-windows-amd64.exe\n" + hex.EncodeToString(h[:]) + "  " + name + "\n")
	return sums, ed25519.Sign(priv, sums), pub, priv
}

func TestVerify(t *testing.T) {
	asset := []byte("new binary")
	const name = "backstop-linux-amd64"
	sums, sig, pub, _ := signedRelease(t, asset, name)
	otherPub, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	_ = otherPub
	tampered := bytes.Clone(asset)
	tampered[0] ^= 1
	badSig := bytes.Clone(sig)
	badSig[5] ^= 1
	tests := []struct {
		name             string
		asset, sums, sig []byte
		assetName        string
		wantErr          error
	}{
		{"good raw signature", asset, sums, sig, name, nil},
		{"good base64 signature", asset, sums, []byte(base64.StdEncoding.EncodeToString(sig) + "\n"), name, nil},
		{"tampered asset", tampered, sums, sig, name, ErrChecksum},
		{"bad signature", asset, sums, badSig, name, ErrBadSignature},
		{"signed by another key", asset, sums, ed25519.Sign(otherPriv, sums), name, ErrBadSignature},
		{"sums changed after signing", asset, append(bytes.Clone(sums), "x  y\n"...), sig, name, ErrBadSignature},
		{"garbage signature", asset, sums, []byte("not a signature"), name, ErrBadSignature},
		{"missing line", asset, sums, sig, "backstop-linux-arm64", ErrNoChecksum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.asset, tt.sums, tt.sig, pub, tt.assetName)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestReplaceAndRollback(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "backstop")
	if err := os.WriteFile(exe, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Replace(exe, []byte("new")); err != nil {
		t.Fatal(err)
	}
	assertFile(t, exe, "new")
	assertFile(t, PreviousPath(exe), "old")
	if fi, _ := os.Stat(exe); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode().Perm())
	}
	if _, err := os.Stat(exe + ".new"); !os.IsNotExist(err) {
		t.Errorf("exe.new left behind: %v", err)
	}
	if err := Rollback(exe); err != nil {
		t.Fatal(err)
	}
	assertFile(t, exe, "old")
	assertFile(t, PreviousPath(exe), "old")
}

func TestReplaceWithoutCurrentBinaryLeavesNothing(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "backstop")
	if err := Replace(exe, []byte("new")); err == nil {
		t.Fatal("Replace without a current binary succeeded")
	}
	if _, err := os.Stat(exe); !os.IsNotExist(err) {
		t.Errorf("exe created: %v", err)
	}
	if _, err := os.Stat(exe + ".new"); !os.IsNotExist(err) {
		t.Errorf("exe.new left behind: %v", err)
	}
}

func TestReleaseKeyDecodes(t *testing.T) {
	if _, err := ReleaseKey(); err != nil {
		t.Fatal(err)
	}
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Fatalf("%s = %q, %v; want %q", path, b, err, want)
	}
}
