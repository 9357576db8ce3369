//go:build !linux

package resticrepo

import "os"

// directFlag is 0 where O_DIRECT does not exist: uploads go through the
// page cache (direct.go).
const directFlag = 0

func setBuffered(*os.File) error { return nil }
