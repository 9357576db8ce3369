package webhooks

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// KeyFileName is the file in the data directory holding the key that seals
// webhook secrets at rest. Losing it makes every stored secret unreadable
// (deliveries then fail until each webhook's secret is rotated).
const KeyFileName = "webhook-secrets.key"

// secretPrefix marks a signing secret in Standard Webhooks form.
const secretPrefix = "whsec_"

// NewSecret returns a fresh signing secret: "whsec_" followed by the
// standard base64 of 32 random bytes. The whole string is the key of
// X-Service-Signature (as receivers paste it); the decoded bytes are the
// Standard Webhooks key, which is how that specification reads "whsec_".
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// standardKey is the Standard Webhooks HMAC key of a secret.
func standardKey(secret string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
}

// SecretBox seals webhook secrets with XChaCha20-Poly1305 under a 32-byte
// key kept in the data directory. A sealed secret is nonce||ciphertext and
// is bound to its webhook id (additional data), so a sealed value copied to
// another webhook's row does not open.
type SecretBox struct{ aead cipher.AEAD }

// OpenSecretBox loads the key from dir, creating it (mode 0600) on first
// use. Creation writes a temporary file, syncs it and links it into place,
// which fails if another process created the key first; that key is used.
func OpenSecretBox(dir string) (*SecretBox, error) {
	path := filepath.Join(dir, KeyFileName)
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKeyFile(dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook secret key: %w", err)
	}
	if len(key) != chacha20poly1305.KeySize {
		return nil, fmt.Errorf("webhook secret key %s: %d bytes, want %d", path, len(key), chacha20poly1305.KeySize)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	return &SecretBox{aead: aead}, nil
}

func createKeyFile(dir, path string) ([]byte, error) {
	key := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, KeyFileName+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// Link, not rename: it never replaces a key another process just made.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return os.ReadFile(path)
		}
		return nil, err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the new directory entry durable
		d.Close()
	}
	return key, nil
}

// Seal encrypts the secret of the webhook.
func (b *SecretBox) Seal(webhookID, secret string) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(secret)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return b.aead.Seal(nonce, nonce, []byte(secret), []byte(webhookID))
}

// Open decrypts a sealed secret of the webhook.
func (b *SecretBox) Open(webhookID string, sealed []byte) (string, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return "", errors.New("sealed secret too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(webhookID))
	if err != nil {
		return "", errors.New("sealed secret does not open with this data directory's key")
	}
	return string(plain), nil
}
