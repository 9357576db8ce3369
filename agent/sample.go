package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"backstop/agentapi/wire"
)

// Sampling proves a backup later: a restore test restores the sampled files
// and compares their SHA-256. A file that changed while restic read it may
// hold other bytes in the snapshot than on disk, so only files whose size
// and modification time were the same before the backup, after it, and after
// hashing are sampled.

const (
	sampleCandidateFactor = 3         // candidates kept per wanted sample
	sampleWalkLimit       = 200_000   // files looked at before sampling stops walking
	sampleMaxFileSize     = 256 << 20 // larger files are not hashed
)

type candidate struct {
	path  string
	size  int64
	mtime time.Time
}

// sampleCandidates walks paths before the backup and keeps a uniform random
// choice (reservoir sampling) of regular files with their size and mtime.
func sampleCandidates(paths, excludes []string, want int) []candidate {
	keep := want * sampleCandidateFactor
	var out []candidate
	seen := 0
	for _, root := range paths {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: restic reports it, sampling skips it
			}
			if excluded(p, excludes) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if seen >= sampleWalkLimit {
				return filepath.SkipAll
			}
			info, err := d.Info()
			if err != nil || info.Size() > sampleMaxFileSize {
				return nil
			}
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil
			}
			c := candidate{path: abs, size: info.Size(), mtime: info.ModTime()}
			seen++
			if len(out) < keep {
				out = append(out, c)
			} else if j := rand.IntN(seen); j < keep {
				out[j] = c
			}
			return nil
		})
	}
	return out
}

// excluded approximates restic's --exclude for the walk: a pattern matches
// the base name or the whole path.
func excluded(p string, excludes []string) bool {
	for _, x := range excludes {
		if ok, _ := filepath.Match(x, filepath.Base(p)); ok {
			return true
		}
		if ok, _ := filepath.Match(x, p); ok {
			return true
		}
		if strings.HasSuffix(x, "/") && strings.Contains(p+"/", x) {
			return true
		}
	}
	return false
}

// sampleFiles hashes up to want candidates whose size and mtime did not
// change since before the backup, re-checking after hashing.
func sampleFiles(cands []candidate, want int) []wire.SampledFile {
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	var out []wire.SampledFile
	for _, c := range cands {
		if len(out) >= want {
			break
		}
		if !unchanged(c) {
			continue
		}
		sum, err := hashFile(c.path)
		if err != nil || !unchanged(c) {
			continue
		}
		out = append(out, wire.SampledFile{Path: c.path, Size: c.size, SHA256: sum})
	}
	return out
}

func unchanged(c candidate) bool {
	info, err := os.Lstat(c.path)
	return err == nil && info.Mode().IsRegular() && info.Size() == c.size && info.ModTime().Equal(c.mtime)
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
