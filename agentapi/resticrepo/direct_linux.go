package resticrepo

import (
	"os"

	"golang.org/x/sys/unix"
)

// directFlag opens a file for direct I/O (direct.go).
const directFlag = unix.O_DIRECT

// setBuffered turns direct I/O off for f: its next writes go through the
// page cache.
func setBuffered(f *os.File) error {
	fd := f.Fd()
	flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, flags&^unix.O_DIRECT)
	return err
}
