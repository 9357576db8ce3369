package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Local is a Backend on a local (or mounted) directory. Each object is a
// file at its name below the root. A create writes a temporary file under
// root/tmp, syncs it, links it to its name (which fails if the name exists:
// create-only without a race) and syncs the directory, so an object either
// exists whole and durable or not at all, whenever the process dies.
type Local struct {
	root string
	fsid string
}

// localTempDir holds files being written; names beginning with it are never
// listed. What a crash leaves there is removed by NewLocal.
const localTempDir = "tmp"

// NewLocal opens (creating if needed, mode 0700) a local target at dir and
// removes temporary files a crashed write left behind.
func NewLocal(dir string) (*Local, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, localTempDir), 0o700); err != nil {
		return nil, fmt.Errorf("storage directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, localTempDir))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		os.Remove(filepath.Join(dir, localTempDir, e.Name()))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("storage directory %s: %w", dir, err)
	}
	return &Local{root: dir, fsid: fmt.Sprintf("%x:%x", st.Fsid.Val[0], st.Fsid.Val[1])}, nil
}

// Filesystem identifies the file system the target is on (as when it was
// opened), so that totals count the space of one file system once.
func (l *Local) Filesystem() string { return l.fsid }

func (l *Local) String() string { return "local:" + l.root }

// Root is the directory the target stores under.
func (l *Local) Root() string { return l.root }

func (l *Local) path(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || name != filepath.ToSlash(filepath.Clean(name)) ||
		name == localTempDir || strings.HasPrefix(name, localTempDir+"/") || strings.HasPrefix(name, "../") || name == ".." {
		return "", fmt.Errorf("invalid object name %q", name)
	}
	return filepath.Join(l.root, filepath.FromSlash(name)), nil
}

var _ Spooler = (*Local)(nil)

// Create implements Backend: the bytes go to a temporary file, which
// CreateFrom links into place.
func (l *Local) Create(ctx context.Context, name string, r io.Reader, size int64) error {
	if _, err := l.path(name); err != nil {
		return err
	}
	f, err := l.SpoolFile()
	if err != nil {
		return l.wrap(name, err)
	}
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d bytes, expected %d", n, size)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return l.wrap(name, err)
	}
	return l.CreateFrom(ctx, name, f)
}

// SpoolFile implements Spooler: a new file in the target's tmp directory.
func (l *Local) SpoolFile() (*os.File, error) {
	return os.CreateTemp(filepath.Join(l.root, localTempDir), "create-*")
}

// CreateFrom implements Spooler: it syncs f, links it to name (which fails
// if name exists: create-only without a race), syncs the directory and
// removes the temporary name.
func (l *Local) CreateFrom(_ context.Context, name string, f *os.File) error {
	tmp := f.Name()
	defer os.Remove(tmp)
	p, err := l.path(name)
	if err != nil {
		f.Close()
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return l.wrap(name, err)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return l.wrap(name, err)
	}
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", name, ErrExists)
		}
		return l.wrap(name, err)
	}
	return l.wrap(name, syncDir(dir))
}

// wrap turns file-system errors into the Backend vocabulary: a full disk or
// quota is ErrFull, a vanished mount ErrUnreachable.
func (l *Local) wrap(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%s on %s: %w (%v)", name, l.root, ErrFull, err)
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.ENOTCONN), errors.Is(err, syscall.ESTALE), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s on %s: %w (%v)", name, l.root, ErrUnreachable, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	return fmt.Errorf("%s on %s: %w", name, l.root, err)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Open implements Backend.
func (l *Local) Open(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, l.wrap(name, err)
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, l.wrap(name, err)
		}
	}
	if length < 0 {
		return f, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, length), f}, nil
}

// Stat implements Backend.
func (l *Local) Stat(_ context.Context, name string) (int64, error) {
	p, err := l.path(name)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, l.wrap(name, err)
	}
	return fi.Size(), nil
}

// List implements Backend. It walks only the directory the prefix names.
func (l *Local) List(ctx context.Context, prefix string, fn func(name string, size int64) error) error {
	start := l.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(l.root, filepath.FromSlash(prefix[:i]))
	}
	var names []string
	sizes := map[string]int64{}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(l.root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == localTempDir {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(rel, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while listing
			}
			return err
		}
		names = append(names, rel)
		sizes[rel] = info.Size()
		return nil
	})
	if err != nil {
		return l.wrap(prefix, err)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := fn(n, sizes[n]); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements Backend.
func (l *Local) Delete(_ context.Context, name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return l.wrap(name, err)
	}
	return nil
}

// Space implements Backend: the file system's size and the bytes free to
// unprivileged users.
func (l *Local) Space(context.Context) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(l.root, &st); err != nil {
		return Space{}, l.wrap("", err)
	}
	return Space{Known: true, CapacityBytes: int64(st.Blocks) * int64(st.Bsize), FreeBytes: int64(st.Bavail) * int64(st.Bsize)}, nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
