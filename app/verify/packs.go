package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// Pack re-hashing. restic names every file under data/ by the SHA-256 of
// its content, so hashing a pack file proves that its bytes are the ones
// written, without the password and without restic: it catches bit rot and
// tampering that restic's own check would only find in the subset it reads.

// pack is one file under data/.
type pack struct {
	id    string
	path  string
	size  int64
	mtime time.Time
}

// listPacks returns the pack files of a repository directory: files under
// data/<2 hex>/ named by 64 lower-case hex digits starting with their
// directory's name. Anything else there (the repository server's .tmp-
// upload files) is not a pack and is skipped.
func listPacks(repoDir string) ([]pack, error) {
	var out []pack
	root := filepath.Join(repoDir, "data")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		name := d.Name()
		if !isHexID(name) || filepath.Base(filepath.Dir(p)) != name[:2] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, pack{id: name, path: p, size: info.Size(), mtime: info.ModTime()})
		return nil
	})
	return out, err
}

func isHexID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// choosePacks picks the packs to re-hash: every pack written since the
// previous verify (since; nil means all are new), as long as they fit in
// newBudget bytes, so each day's new data is proven once; then sampleOld
// packs chosen at random from the rest, so old data is spot-checked for
// rot. New packs beyond the budget join the random pool.
func choosePacks(packs []pack, since *time.Time, newBudget int64, sampleOld int, rnd *rand.Rand) []pack {
	var fresh, old []pack
	for _, p := range packs {
		if since == nil || !p.mtime.Before(*since) {
			fresh = append(fresh, p)
		} else {
			old = append(old, p)
		}
	}
	rnd.Shuffle(len(fresh), func(i, j int) { fresh[i], fresh[j] = fresh[j], fresh[i] })
	var chosen []pack
	var bytes int64
	for _, p := range fresh {
		if bytes+p.size > newBudget {
			old = append(old, p)
			continue
		}
		bytes += p.size
		chosen = append(chosen, p)
	}
	rnd.Shuffle(len(old), func(i, j int) { old[i], old[j] = old[j], old[i] })
	return append(chosen, old[:min(sampleOld, len(old))]...)
}

// packMatches reports whether the pack file's SHA-256 equals its name. A
// file that cannot be read is reported as not matching, with the reason: an
// unreadable pack is lost data all the same.
func packMatches(ctx context.Context, p pack) (bool, error) {
	sum, err := sha256File(ctx, p.path)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("reading pack %s: %w", p.id, err)
	}
	return sum == p.id, nil
}

// sha256File returns the lower-case hex SHA-256 of a file's content.
func sha256File(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops a long hash when the job is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
