package archive

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data (and its size) durable.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// punchHole deallocates [off, off+n) of f (partial blocks are zeroed),
// keeping its size.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}
