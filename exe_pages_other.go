//go:build !linux

package main

// releaseExecutablePages and useExecutablePages are Linux-only (madvise
// MADV_PAGEOUT, MADV_RANDOM).
func releaseExecutablePages() int64 { return 0 }
func useExecutablePages()           {}
