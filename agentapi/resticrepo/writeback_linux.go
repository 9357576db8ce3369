package resticrepo

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to begin writing the file's bytes
// [off, off+n) to disk now, without waiting for it (sync_file_range with
// SYNC_FILE_RANGE_WRITE). The fsync that acknowledges the upload then has
// only the tail left to flush. An error is ignored: the fsync still makes
// the file durable, this only starts it early.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
