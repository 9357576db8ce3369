package webhooks

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"backstop/app/keyfile"

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
// use (keyfile.Load).
func OpenSecretBox(dir string) (*SecretBox, error) {
	key, err := keyfile.Load(dir, KeyFileName, chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("webhook secret key: %w", err)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	return &SecretBox{aead: aead}, nil
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
