package chain

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a parsed checkpoint (C2SP tlog-checkpoint body).
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// Body is the checkpoint's note text before signatures:
// "<origin>\n<size>\n<base64 root>\n".
func (c Checkpoint) Body() string {
	return c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Root[:]) + "\n"
}

// ParseCheckpointBody parses a checkpoint body strictly: exactly the three
// lines Body writes (no extension lines), a canonical decimal size and a
// canonical base64 root of 32 bytes.
func ParseCheckpointBody(body string) (Checkpoint, error) {
	lines := strings.Split(body, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return Checkpoint{}, errors.New("checkpoint: body is not origin, size and root, each ending in a newline")
	}
	var c Checkpoint
	c.Origin = lines[0]
	if c.Origin == "" {
		return Checkpoint{}, errors.New("checkpoint: empty origin")
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("checkpoint: bad size %q", lines[1])
	}
	c.Size = n
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize || base64.StdEncoding.EncodeToString(root) != lines[2] {
		return Checkpoint{}, fmt.Errorf("checkpoint: bad root hash %q", lines[2])
	}
	copy(c.Root[:], root)
	return c, nil
}

// noteBody is the text of a signed note before the blank line and the
// signatures, unverified (for callers that check the signature elsewhere).
func noteBody(signed string) (string, error) {
	i := strings.Index(signed, "\n\n")
	if i < 0 {
		return "", errors.New("checkpoint: not a signed note")
	}
	return signed[:i+1], nil
}

// Signer signs checkpoints with the appliance's Ed25519 archive key.
type Signer struct {
	signer      note.Signer
	verifierKey string
}

// LoadOrCreateSigner reads the note signer key from path (mode 0600),
// creating it (name = the public host, e.g. "backstop.example.com") on
// first use with temp file + fsync + rename. An existing key keeps the
// name it was created with: the verifier key auditors pinned stays valid.
func LoadOrCreateSigner(path, name string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := createSignerKey(path, name); err != nil {
			return nil, err
		}
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("archive signer key: %w", err)
	}
	skey := strings.TrimSpace(string(b))
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("archive signer key %s: %w", path, err)
	}
	vkey, err := verifierKeyOf(skey)
	if err != nil {
		return nil, fmt.Errorf("archive signer key %s: %w", path, err)
	}
	return &Signer{signer: s, verifierKey: vkey}, nil
}

// verifierKeyOf derives the verifier key from an encoded Ed25519 signer key
// ("PRIVATE+KEY+<name>+<hash>+<base64(0x01 ‖ seed)>").
func verifierKeyOf(skey string) (string, error) {
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return "", errors.New("not a note signer key")
	}
	seed, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(seed) != 33 || seed[0] != 1 {
		return "", errors.New("not an Ed25519 note signer key")
	}
	return note.NewEd25519VerifierKey(parts[2], ed25519Public(seed[1:]))
}

func createSignerKey(path, name string) error {
	if name == "" {
		return errors.New("archive signer key: empty name")
	}
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return fmt.Errorf("archive signer key: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".archive-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// VerifierKey is the note verifier key ("<name>+<hash>+<base64 key>") an
// auditor pins.
func (s *Signer) VerifierKey() string { return s.verifierKey }

// Name is the key's name (the public host it was created for).
func (s *Signer) Name() string { return s.signer.Name() }

// Sign returns the signed note text of c.
func (s *Signer) Sign(c Checkpoint) (string, error) {
	b, err := note.Sign(&note.Note{Text: c.Body()}, s.signer)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	return string(b), nil
}

// OpenCheckpoint verifies a signed note against the verifier key and
// parses its body; origin must match when not "".
func OpenCheckpoint(signed, verifierKey, origin string) (Checkpoint, error) {
	v, err := note.NewVerifier(verifierKey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: verifier key: %w", err)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := ParseCheckpointBody(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if origin != "" && c.Origin != origin {
		return Checkpoint{}, fmt.Errorf("checkpoint: origin %q, want %q", c.Origin, origin)
	}
	return c, nil
}

// CheckConsistent checks that the checkpoint newer extends older: both
// signed by key, same origin, newer no smaller, and proof (tlog.ProveTree
// from older's size to newer's) valid. A log rolled back to, or rewritten
// from, an older state fails against a checkpoint seen before.
func CheckConsistent(older, newer, key string, proof []tlog.Hash) error {
	o, err := OpenCheckpoint(older, key, "")
	if err != nil {
		return fmt.Errorf("older %w", err)
	}
	n, err := OpenCheckpoint(newer, key, o.Origin)
	if err != nil {
		return fmt.Errorf("newer %w", err)
	}
	if n.Size < o.Size {
		return fmt.Errorf("checkpoint: size went back from %d to %d (rolled back)", o.Size, n.Size)
	}
	if err := tlog.CheckTree(proof, n.Size, n.Root, o.Size, o.Root); err != nil {
		return fmt.Errorf("checkpoint: size %d is not consistent with size %d: %w", n.Size, o.Size, err)
	}
	return nil
}

// ForkError names two validly signed checkpoints of one origin and size
// with different roots: the log showed different histories.
type ForkError struct {
	Origin string
	Size   int64
	Roots  [2]tlog.Hash
}

func (e *ForkError) Error() string {
	return fmt.Sprintf("checkpoint: fork: %s has two trees of size %d (roots %s and %s)", e.Origin, e.Size, e.Roots[0], e.Roots[1])
}

// DetectFork opens every note with key and reports the first fork (a
// *ForkError): two checkpoints of the same origin and size whose roots
// differ. A note that does not verify is an error too.
func DetectFork(notes []string, key string) error {
	type at struct {
		origin string
		size   int64
	}
	seen := map[at]tlog.Hash{}
	for i, s := range notes {
		c, err := OpenCheckpoint(s, key, "")
		if err != nil {
			return fmt.Errorf("note %d: %w", i, err)
		}
		k := at{c.Origin, c.Size}
		if r, ok := seen[k]; ok && r != c.Root {
			return &ForkError{Origin: c.Origin, Size: c.Size, Roots: [2]tlog.Hash{r, c.Root}}
		}
		seen[k] = c.Root
	}
	return nil
}

func ed25519Public(seed []byte) ed25519.PublicKey {
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}
