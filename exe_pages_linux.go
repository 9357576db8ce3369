package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseExecutablePages gives the pages of the appliance's own executable
// back to the kernel (madvise MADV_PAGEOUT on its read-only mappings: code,
// read-only data, the runtime's tables) and returns how many bytes of
// mappings it advised. A Go binary of this size keeps ~27 MB of itself
// resident after a burst of requests: what the requests ran, the
// reflection data the API layer walked at start-up, and the neighbours the
// kernel reads ahead and maps around every page fault. Idle, the appliance
// runs a few timers that touch a small part of that; the kernel reads the
// rest again from the file when code needs it, as it would after
// reclaiming it under memory pressure. Until useExecutablePages, the
// mappings are also marked MADV_RANDOM, so that what the timers touch comes
// back a page at a time instead of with 128 KiB of read-ahead each.
// Kernels before 5.4 have no MADV_PAGEOUT (EINVAL): then nothing happens.
// Writable mappings (the heap, .data) are never touched.
func releaseExecutablePages() int64 {
	advised := adviseExecutable(unix.MADV_PAGEOUT)
	if advised > 0 {
		adviseExecutable(unix.MADV_RANDOM)
		dropExecutableCache()
	}
	return advised
}

// dropExecutableCache asks the kernel to drop the executable's pages from
// the page cache (POSIX_FADV_DONTNEED), now that this process no longer
// maps them. MADV_PAGEOUT unmaps a page but leaves it cached when the
// kernel has recently used it, and a page fault maps every cached page
// around it (fault-around, 64 KiB), so without this the first timers after
// the trim bring most of it back. Pages other processes map stay.
func dropExecutableCache() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.Open(exe)
	if err != nil {
		return
	}
	defer f.Close()
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// useExecutablePages undoes the MADV_RANDOM of releaseExecutablePages when
// requests arrive again, so the code they need is read back with the
// kernel's usual read-ahead.
func useExecutablePages() { adviseExecutable(unix.MADV_NORMAL) }

// adviseExecutable applies advice to the executable's read-only mappings
// and returns how many bytes it advised; it stops at the first refusal.
func adviseExecutable(advice int) int64 {
	exe, err := os.Executable()
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var advised int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-01614000 r-xp 00000000 fe:01 1234 /path/to/backstop
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice)); errno != 0 {
			return advised
		}
		advised += int64(end - start)
	}
	return advised
}
