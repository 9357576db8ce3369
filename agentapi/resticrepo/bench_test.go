package resticrepo

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkList100k lists a repository of 100,000 data files (v2, with
// sizes) over loopback.
//
//	go test -run '^$' -bench List100k -benchtime 5x ./agentapi/resticrepo/
func BenchmarkList100k(b *testing.B) {
	const files = 100_000
	e := newTestEnv(b, Options{})
	id, secret := e.endpoint()
	c := e.client(id, secret, id)
	c.want(200, "POST", "?create=true", nil)
	repo := filepath.Join(e.dir, id)
	for i := 0; i < files; i++ {
		name := hashName([]byte(strconv.Itoa(i)))
		if err := os.WriteFile(filepath.Join(repo, "data", name[:2], name), []byte(name[:i%64]), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	// Check the listing once; the loop then measures the server, not the
	// client's JSON decoding.
	code, body, _ := c.do("GET", "data/", nil, "Accept", mediaTypeV2)
	var list []struct {
		Name string `json:"name"`
		Size int64  `json:"size"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list) != files {
		b.Fatalf("listed %d files: %d %v", len(list), code, err)
	}
	req, _ := http.NewRequest("GET", c.base+"data/", nil)
	req.SetBasicAuth(id, secret)
	req.Header.Set("Accept", mediaTypeV2)
	for b.Loop() {
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(len(body)) {
			b.Fatalf("listing of %d bytes, want %d: %v", n, len(body), err)
		}
	}
}

// BenchmarkResticBackup compares a restic backup of incompressible files to
// a local directory repository with the same backup through the handler on
// loopback (hash check on), and reports both throughputs, their ratio, and
// the peak RSS of this process, which is the server side (restic runs as a
// child process). The size is BACKSTOP_BENCH_MIB (default 256); the figure
// for the report was measured with 2048:
//
//	BACKSTOP_BENCH_MIB=2048 go test -run '^$' -bench ResticBackup -benchtime 1x -timeout 30m ./agentapi/resticrepo/
func BenchmarkResticBackup(b *testing.B) {
	mib := 256
	if v := os.Getenv("BACKSTOP_BENCH_MIB"); v != "" {
		mib, _ = strconv.Atoi(v)
	}
	e := newTestEnv(b, Options{})
	src := b.TempDir()
	writeIncompressible(b, src, int64(mib)<<20, 32<<20)

	var local, remote []float64
	for round := 0; round < 2; round++ {
		// A fresh repository each round, so every backup stores everything.
		localRepo := newRestic(b, filepath.Join(b.TempDir(), "repo"))
		localRepo.must("init")
		local = append(local, timedBackup(b, localRepo, src, mib))
		must(b, os.RemoveAll(localRepo.repo))

		id, secret := e.endpoint()
		remoteRepo := newRestic(b, "rest:http://"+id+":"+secret+"@"+e.srv.Listener.Addr().String()+PathPrefix+id+"/")
		remoteRepo.must("init")
		remote = append(remote, timedBackup(b, remoteRepo, src, mib))
		must(b, os.RemoveAll(filepath.Join(e.dir, id)))
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	bestLocal, bestRemote := max(local[0], local[1]), max(remote[0], remote[1])
	b.ReportMetric(bestLocal, "local-MB/s")
	b.ReportMetric(bestRemote, "appliance-MB/s")
	b.ReportMetric(bestRemote/bestLocal*100, "%-of-local")
	b.ReportMetric(float64(ru.Maxrss)/1024, "server-peak-RSS-MiB")
	b.Logf("local %v MB/s, appliance %v MB/s", local, remote)
}

// timedBackup runs one backup and returns MiB/s.
func timedBackup(b *testing.B, r *restic, src string, mib int) float64 {
	start := time.Now()
	r.must("backup", src)
	return float64(mib) / time.Since(start).Seconds()
}

// writeIncompressible writes total bytes of random data in files of
// fileSize, through one small buffer so the generator adds little to RSS.
func writeIncompressible(b *testing.B, dir string, total, fileSize int64) {
	buf := make([]byte, 1<<20)
	for i := 0; total > 0; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%04d", i)))
		if err != nil {
			b.Fatal(err)
		}
		n := min(total, fileSize)
		for left := n; left > 0; left -= int64(len(buf)) {
			_, _ = rand.Read(buf)
			if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
				b.Fatal(err)
			}
		}
		must(b, f.Close())
		total -= n
	}
}
