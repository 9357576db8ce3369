package blobstore

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"backstop/app"
	"backstop/app/keyfile"

	"golang.org/x/crypto/chacha20poly1305"
)

// KeyFileName is the appliance key in the data directory (mode 0600). It
// seals every tenant's data key; the storage targets hold only sealed keys.
// Without this file (or a copy of it) nothing in the blob store can be read.
const KeyFileName = "blobstore.key"

// ApplianceKey seals and opens tenant data keys.
type ApplianceKey struct {
	raw  []byte
	aead cipher.AEAD
}

// LoadApplianceKey reads the key in dir, creating it on first use
// (keyfile.Load).
func LoadApplianceKey(dir string) (*ApplianceKey, error) {
	key, err := keyfile.Load(dir, KeyFileName, chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("blob store appliance key: %w", err)
	}
	return ParseApplianceKey(key)
}

// ParseApplianceKey checks and wraps the raw bytes of a key file.
func ParseApplianceKey(key []byte) (*ApplianceKey, error) {
	if len(key) != chacha20poly1305.KeySize {
		return nil, fmt.Errorf("blob store appliance key: %d bytes, want %d", len(key), chacha20poly1305.KeySize)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	return &ApplianceKey{raw: append([]byte(nil), key...), aead: aead}, nil
}

// Bytes returns the key file's content (for the one-time download).
func (k *ApplianceKey) Bytes() []byte { return append([]byte(nil), k.raw...) }

func tenantKeyAD(tenantID string) []byte {
	return []byte("backstop-blobstore/v1 tenant-key " + tenantID)
}

// sealTenantKey encrypts a tenant master key, bound to the tenant id.
func (k *ApplianceKey) sealTenantKey(tenantID string, master []byte) []byte {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(master)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return k.aead.Seal(nonce, nonce, master, tenantKeyAD(tenantID))
}

// openTenantKey decrypts a sealed tenant master key.
func (k *ApplianceKey) openTenantKey(tenantID string, sealed []byte) ([]byte, error) {
	if len(sealed) < k.aead.NonceSize() {
		return nil, fmt.Errorf("sealed key of tenant %s is truncated", tenantID)
	}
	master, err := k.aead.Open(nil, sealed[:k.aead.NonceSize()], sealed[k.aead.NonceSize():], tenantKeyAD(tenantID))
	if err != nil {
		return nil, fmt.Errorf("the data key of tenant %s does not open with this appliance key", tenantID)
	}
	return master, nil
}

// tenantKeys are the keys derived from one tenant's master key, each for
// one purpose: ids (HMAC-SHA-256), encryption (XChaCha20-Poly1305) and the
// chunker's gear table, so that chunk boundaries do not reveal known files.
type tenantKeys struct {
	id      []byte
	aead    cipher.AEAD
	chunker []byte
}

// deriveKey is HKDF-Expand with SHA-256 for one 32-byte output block:
// HMAC(master, label || 0x01).
func deriveKey(master []byte, label string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("backstop-blobstore/v1 " + label))
	m.Write([]byte{1})
	return m.Sum(nil)
}

func newTenantKeys(master []byte) (*tenantKeys, error) {
	aead, err := chacha20poly1305.NewX(deriveKey(master, "encrypt"))
	if err != nil {
		return nil, err
	}
	return &tenantKeys{id: deriveKey(master, "blob-id"), aead: aead, chunker: deriveKey(master, "chunker")}, nil
}

// blobID is the keyed hash naming a plaintext.
func (k *tenantKeys) blobID(plain []byte) app.BlobID {
	m := hmac.New(sha256.New, k.id)
	m.Write(plain)
	var id app.BlobID
	m.Sum(id[:0])
	return id
}
