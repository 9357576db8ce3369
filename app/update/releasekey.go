package update

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
)

// releaseKey is the standard base64 of the Ed25519 public key that signs
// releases' SHA256SUMS. A build may replace it:
//
//	go build -ldflags "-X backstop/app/update.releaseKey=<base64>"
//
// The private key is kept offline; see docs/updates.md for how a release is
// signed. The default below is a placeholder whose private half was never
// kept: a build without the -X flag refuses every release, which fails
// safe. Release builds must inject the project's real key.
var releaseKey = "rTzKNHdqHB+wn0yEmm0VU/EQMBHyqC8ZCc7oSHsGq+s="

// ReleaseKey returns the public key built into the binary. It fails only
// when a build injected something that is not a 32-byte base64 key.
func ReleaseKey() (ed25519.PublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(releaseKey)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("update: the built-in release key is not a base64 Ed25519 public key")
	}
	return ed25519.PublicKey(raw), nil
}
