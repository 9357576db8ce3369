package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB reads RssFile (resident file-backed pages) of this process.
func rssFileKiB(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// The test binary is a Go executable like the appliance: after the page-out
// fewer of its pages are resident, and it goes on running the rest of the
// tests (the kernel reads back what it needs).
func TestReleaseExecutablePages(t *testing.T) {
	before := rssFileKiB(t)
	advised := releaseExecutablePages()
	after := rssFileKiB(t)
	t.Logf("advised %d KiB of mappings; RssFile %d KiB -> %d KiB", advised>>10, before, after)
	if advised == 0 {
		t.Fatal("no mapping of the executable was advised (kernel without MADV_PAGEOUT?)")
	}
	if after >= before {
		t.Fatalf("RssFile did not drop: %d KiB -> %d KiB", before, after)
	}
}
