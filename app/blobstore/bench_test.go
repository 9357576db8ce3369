package blobstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backstop/app/blobstore"
	"backstop/e2e"
)

// The throughput benchmark of issue 8: a mail-like corpus (10,000 messages
// of 2-64 KiB and 100 messages carrying attachments of 1-10 MiB, 40 of them
// repeats) written into the local target, against `restic backup` of the
// same corpus as files into a local repository, in the same run. The store
// runs in a child process so its peak RSS is measured as the kernel sees it.
//
//	go test ./app/blobstore -run '^$' -bench StoreVsRestic -benchtime 1x
//
// BLOBSTORE_BENCH_MESSAGES shrinks the corpus for a quick look.
func BenchmarkStoreVsRestic(b *testing.B) {
	restic := e2e.RequireTool(b, "restic", "restic")
	corpus, size := benchCorpus(b)
	b.Logf("corpus: %.1f MiB", float64(size)/(1<<20))
	for range b.N {
		warmCache(corpus) // both tools read the corpus from the page cache
		syscall.Sync()    // and neither waits for the other's writeback
		storeDir := b.TempDir()
		storeSecs, rss, out := runStoreChild(b, corpus, storeDir)
		stored := dirBytes(filepath.Join(storeDir, "blobs"))

		repo := b.TempDir()
		env := append(os.Environ(), "RESTIC_PASSWORD=bench", "RESTIC_REPOSITORY="+repo, "RESTIC_CACHE_DIR="+b.TempDir())
		run := func(args ...string) time.Duration {
			cmd := exec.Command(restic, args...)
			cmd.Env = env
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("restic %v: %v\n%s", args, err, out)
			}
			return time.Since(start)
		}
		run("init")
		syscall.Sync()
		resticSecs := run("backup", "--quiet", corpus).Seconds()
		resticStored := dirBytes(repo)

		mb := float64(size) / (1 << 20)
		b.ReportMetric(mb/storeSecs, "store-MiB/s")
		b.ReportMetric(mb/resticSecs, "restic-MiB/s")
		b.ReportMetric(resticSecs/storeSecs, "speedup")
		b.ReportMetric(float64(stored)/(1<<20), "store-stored-MiB")
		b.ReportMetric(float64(resticStored)/(1<<20), "restic-stored-MiB")
		b.ReportMetric(float64(rss)/(1<<20), "store-peak-RSS-MiB")
		b.Logf("store: %.2f s (%.0f MiB/s), %.1f MiB stored, peak RSS %.1f MiB; restic: %.2f s (%.0f MiB/s), %.1f MiB stored; %s",
			storeSecs, mb/storeSecs, float64(stored)/(1<<20), float64(rss)/(1<<20), resticSecs, mb/resticSecs,
			float64(resticStored)/(1<<20), strings.TrimSpace(out))
	}
}

// BenchmarkLargeItemRSS stores one 512 MiB item and reports the child's
// peak RSS: memory must not grow with the size of an item.
func BenchmarkLargeItemRSS(b *testing.B) {
	corpus := b.TempDir()
	f, err := os.Create(filepath.Join(corpus, "huge.bin"))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1})
	if _, err := io.CopyN(f, rng, 512<<20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	for range b.N {
		secs, rss, _ := runStoreChild(b, corpus, b.TempDir())
		b.ReportMetric(512/secs, "MiB/s")
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
	}
}

// runStoreChild stores every file of corpus as one snapshot in a fresh
// data directory, in a child process, and returns the seconds it took, the
// child's peak RSS and what it printed. The peak is the child's own VmHWM:
// its rusage would also count the parent's pages, which Linux charges to a
// child started by vfork and exec.
func runStoreChild(b *testing.B, corpus, dataDir string) (float64, int64, string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoreBenchChild$")
	cmd.Env = append(os.Environ(), "BLOBSTORE_BENCH_CORPUS="+corpus, "BLOBSTORE_BENCH_DATA="+dataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("store child: %v\n%s", err, out)
	}
	var secs float64
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "seconds "); ok {
			fmt.Sscan(v, &secs)
		}
	}
	var rssKiB int64
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &rssKiB)
		}
	}
	if rssKiB == 0 {
		b.Fatalf("store child reported no peak RSS:\n%s", out)
	}
	return secs, rssKiB << 10, string(out)
}

// TestStoreBenchChild is the child of runStoreChild; it does nothing unless
// started by it.
func TestStoreBenchChild(t *testing.T) {
	corpus := os.Getenv("BLOBSTORE_BENCH_CORPUS")
	if corpus == "" {
		t.Skip("started by the benchmarks only")
	}
	f := openFixture(t, os.Getenv("BLOBSTORE_BENCH_DATA"), "")
	f.store = f.newStoreWithPacks(0) // production's pack size
	ctx := context.Background()
	var files []string
	filepath.Walk(corpus, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	start := time.Now()
	w, err := f.store.NewWriter(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]blobstore.Item, len(files))
	work := make(chan int)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	workers := 2
	fmt.Sscan(os.Getenv("BLOBSTORE_BENCH_WORKERS"), &workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				fh, err := os.Open(files[i])
				if err == nil {
					items[i].Content, err = w.PutItem(ctx, fh)
					fh.Close()
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
				items[i].ID, items[i].Name, items[i].Kind = files[i], filepath.Base(files[i]), "message"
			}
		}()
	}
	for i := range files {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	_, err = w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: "po_bench"}, func(yield func(blobstore.Item) error) error {
		for _, it := range items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	st := w.Stats()
	fmt.Printf("seconds %f\n", time.Since(start).Seconds())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("items %d, %d new blobs, %d packs; heap sys %d MiB, go sys %d MiB, %d GCs\n", st.Items, st.NewBlobs, st.Packs,
		ms.HeapSys>>20, ms.Sys>>20, ms.NumGC)
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			fmt.Println(l)
		}
	}
}

// benchCorpus returns the corpus directory and its size in bytes. With
// BLOBSTORE_BENCH_CORPUS_DIR set, the corpus is written there once and
// reused by later runs (for profiling); otherwise in a temporary directory.
func benchCorpus(b *testing.B) (string, int64) {
	n := 10000
	fmt.Sscan(os.Getenv("BLOBSTORE_BENCH_MESSAGES"), &n)
	dir := os.Getenv("BLOBSTORE_BENCH_CORPUS_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else if size := dirBytes(dir); size > 0 {
		return dir, size
	}
	return dir, writeCorpus(b, dir, n, n/100)
}

// writeCorpus writes n text messages of 2-64 KiB and a attachment messages
// (1-10 MiB attachments, 40 % repeats) and returns their total size.
func writeCorpus(b *testing.B, dir string, n, a int) int64 {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part invoice meeting quarterly backup server please regards attached report")
	var total int64
	folder := func(i int) string {
		d := filepath.Join(dir, []string{"INBOX", "Sent", "Archive", "Projects"}[i%4])
		os.MkdirAll(d, 0o700)
		return d
	}
	for i := range n {
		var body bytes.Buffer
		fmt.Fprintf(&body, "From: person%d@example.com\r\nTo: team@example.com\r\nSubject: %s %d\r\nDate: Mon, 2 Nov 2026 10:%02d:00 +0000\r\nMessage-ID: <%d.%d@example.com>\r\n\r\n",
			rng.IntN(500), words[rng.IntN(len(words))], i, i%60, i, rng.Uint32())
		target := 2<<10 + rng.IntN(62<<10)
		for body.Len() < target {
			body.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(12) == 0 {
				body.WriteString(".\r\n")
			} else {
				body.WriteByte(' ')
			}
		}
		os.WriteFile(filepath.Join(folder(i), fmt.Sprintf("%06d.eml", i)), body.Bytes(), 0o600)
		total += int64(body.Len())
	}
	distinct := a * 6 / 10
	attachments := make([][]byte, distinct)
	for i := range attachments {
		attachments[i] = make([]byte, 1<<20+rng.IntN(9<<20))
		crand := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)})
		crand.Read(attachments[i])
	}
	for i := range a {
		att := attachments[i%distinct]
		var m bytes.Buffer
		fmt.Fprintf(&m, "From: sender%d@example.com\r\nSubject: Attachment %d\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n--b%d\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n--b%d\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n", i, i, i, i, i)
		enc := base64.StdEncoding.EncodeToString(att)
		for len(enc) > 76 {
			m.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		fmt.Fprintf(&m, "%s\r\n--b%d--\r\n", enc, i)
		os.WriteFile(filepath.Join(folder(i), fmt.Sprintf("att%04d.eml", i)), m.Bytes(), 0o600)
		total += int64(m.Len())
	}
	return total
}

// warmCache reads every file under dir once, so whichever tool runs first
// does not pay for reading the corpus from disk.
func warmCache(dir string) {
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if f, err := os.Open(p); err == nil {
				io.Copy(io.Discard, f)
				f.Close()
			}
		}
		return nil
	})
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
