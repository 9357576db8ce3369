package imapbackup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app/blobstore"
	"backstop/app/imapbackup/dovecottest"
	"backstop/e2e"
	"backstop/store/storetest"

	"github.com/emersion/go-imap/v2"
)

// TestBenchmarkVsMbsync measures, side by side on one Dovecot, a full
// backup of 10,000 messages (about 240 MB, 4 folders) by Backstop and by
// mbsync (to a Maildir), a no-change incremental of each, and a restore of
// the 10,000 messages run twice. Backstop runs in child processes so their
// own VmHWM is the peak RSS. It runs only with IMAPBACKUP_BENCH=1 (about a
// minute); IMAPBACKUP_BENCH_MESSAGES changes the count.
func TestBenchmarkVsMbsync(t *testing.T) {
	if os.Getenv("IMAPBACKUP_BENCH") != "1" {
		t.Skip("IMAPBACKUP_BENCH=1 runs the benchmark")
	}
	mbsync := e2e.RequireTool(t, "mbsync", "isync")
	n := 10000
	fmt.Sscan(os.Getenv("IMAPBACKUP_BENCH_MESSAGES"), &n)
	srv := dovecottest.Start(t)
	srv.AddUser("bench", "benchpw")
	folders := []string{"INBOX", "Archive", "Sent", "Projects"}
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	date := time.Now().Add(-24 * time.Hour)
	for i := range n {
		// 2-64 KiB, mean about 24 KiB: mostly text mail, some attachments.
		size := 2<<10 + rng.IntN(40<<10)
		if i%10 == 0 {
			size = 32<<10 + rng.IntN(32<<10)
		}
		msg := benchMessage(rng, i, size)
		total += int64(len(msg))
		srv.Deliver("bench", folders[i%len(folders)], msg, "S", date.Add(time.Duration(i)*time.Second))
	}
	t.Logf("corpus: %d messages, %.1f MB, %d folders", n, float64(total)/1e6, len(folders))
	acct := Account{Host: srv.Host, Port: srv.Port, Security: SecurityNone, Username: "bench", Password: "benchpw"}
	// Dovecot indexes the maildirs at the first look: done once here, so
	// both tools find the same warm server.
	warm := &fixture{t: t, srv: srv, acct: acct}
	c := warm.client()
	for _, fo := range folders {
		warm.messages(c, fo)
	}
	c.Logout().Wait()

	// mbsync, pulling everything to a Maildir, then a no-change run.
	dir := t.TempDir()
	conf := filepath.Join(dir, "mbsyncrc")
	os.MkdirAll(filepath.Join(dir, "mail"), 0o700)
	os.WriteFile(conf, []byte(fmt.Sprintf(`IMAPAccount bench
Host %s
Port %d
User bench
Pass benchpw
SSLType None
AuthMechs LOGIN

IMAPStore remote
Account bench

MaildirStore local
Path %s/mail/
Inbox %s/mail/INBOX
SubFolders Verbatim

Channel bench
Far :remote:
Near :local:
Patterns *
Create Near
Sync Pull
SyncState *
`, srv.Host, srv.Port, dir, dir)), 0o600)
	runMbsync := func() time.Duration {
		start := time.Now()
		out, err := exec.Command(mbsync, "-c", conf, "-a", "-q").CombinedOutput()
		if err != nil {
			t.Fatalf("mbsync: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	mbFull := runMbsync()
	mbNone := runMbsync()
	var files int
	filepath.Walk(filepath.Join(dir, "mail"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && (strings.Contains(p, "/cur/") || strings.Contains(p, "/new/")) {
			files++
		}
		return nil
	})
	if files != n {
		t.Fatalf("mbsync pulled %d messages of %d", files, n)
	}

	data := t.TempDir()
	env := []string{"IMAPBACKUP_BENCH_CHILD_DATA=" + data, fmt.Sprintf("IMAPBACKUP_BENCH_PORT=%d", srv.Port)}
	backup := runBenchChild(t, "backup", env)
	restore := runBenchChild(t, "restore", env)
	fs := func(k string, out map[string]string) float64 {
		var v float64
		fmt.Sscan(out[k], &v)
		return v
	}
	bk, inc, r1, r2 := fs("backup", backup), fs("incremental", restore), fs("restore", restore), fs("restore2", restore)
	t.Logf("mbsync full pull:          %6.2f s  %7.0f msg/s", mbFull.Seconds(), float64(n)/mbFull.Seconds())
	t.Logf("Backstop full backup:      %6.2f s  %7.0f msg/s (%.1f× mbsync), stored %s bytes, peak RSS %s",
		bk, float64(n)/bk, mbFull.Seconds()/bk, backup["stored"], backup["VmHWM"])
	t.Logf("mbsync no-change run:      %6.3f s", mbNone.Seconds())
	t.Logf("Backstop no-change run:    %6.3f s", inc)
	t.Logf("Backstop restore:          %6.2f s  %7.0f msg/s, peak RSS %s (Go heap in use at most %s MiB)", r1, float64(n)/r1,
		restore["VmHWM"], restore["heapInusePeakMiB"])
	t.Logf("Backstop restore again:    %6.2f s  restored %s, skipped %s", r2, restore["restored2"], restore["skipped2"])
	t.Logf("restored folder holds %s messages", restore["count"])
}

func benchMessage(rng *rand.Rand, i, size int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Sender %d <s%d@example.com>\r\nTo: bench@example.com\r\nSubject: Benchmark message %d\r\n", i%97, i%97, i)
	fmt.Fprintf(&b, "Date: Mon, 02 Jan 2006 15:04:05 +0000\r\nMessage-ID: <bench.%d@example.com>\r\nMIME-Version: 1.0\r\n\r\n", i)
	const letters = "abcdefghijklmnopqrstuvwxyz      ABCDEFGHIJ0123456789.,"
	line := make([]byte, 76)
	for b.Len() < size {
		for k := range line {
			line[k] = letters[rng.IntN(len(letters))]
		}
		b.Write(line)
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

func runBenchChild(t *testing.T, mode string, env []string) map[string]string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchChild$", "-test.v")
	cmd.Env = append(append(os.Environ(), env...), "IMAPBACKUP_BENCH_CHILD="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s child: %v\n%s", mode, err, out)
	}
	kv := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "bench.") {
			kv[strings.TrimPrefix(k, "bench.")] = v
		}
	}
	return kv
}

// TestBenchChild is the Backstop side of the benchmark, in its own
// process; it does nothing unless started by runBenchChild.
func TestBenchChild(t *testing.T) {
	mode := os.Getenv("IMAPBACKUP_BENCH_CHILD")
	if mode == "" {
		t.Skip("started by TestBenchmarkVsMbsync only")
	}
	dir := os.Getenv("IMAPBACKUP_BENCH_CHILD_DATA")
	var port int
	fmt.Sscan(os.Getenv("IMAPBACKUP_BENCH_PORT"), &port)
	acct := Account{Host: "127.0.0.1", Port: port, Security: SecurityNone, Username: "bench", Password: "benchpw"}
	db := storetest.Open(t, dir)
	tenantFile := filepath.Join(dir, "tenant")
	tenant := ""
	if b, err := os.ReadFile(tenantFile); err == nil {
		tenant = string(b)
	} else {
		tenant = storetest.Tenant(t, db, "Bench")
		os.WriteFile(tenantFile, []byte(tenant), 0o600)
	}
	local, err := blobstore.NewLocal(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := blobstore.LoadApplianceKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Production settings: the blob store's default pack size and uploads.
	st, err := blobstore.New(blobstore.Config{Key: key, Catalog: db, Targets: &targets{b: local},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, db: db, store: st, tenant: tenant, acct: acct}
	ctx := context.Background()
	out := func(k string, v any) { fmt.Printf("bench.%s=%v\n", k, v) }
	// The Go heap's peak, sampled, beside the process's VmHWM: what the
	// heap held live versus what the runtime kept around it.
	var heapPeak, livePeak atomic.Uint64
	stopSampling := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > heapPeak.Load() {
				heapPeak.Store(ms.HeapInuse)
			}
			if ms.HeapAlloc > livePeak.Load() {
				livePeak.Store(ms.HeapAlloc)
			}
		}
	}()
	defer func() {
		close(stopSampling)
		out("heapInusePeakMiB", heapPeak.Load()>>20)
		out("heapAllocPeakMiB", livePeak.Load()>>20)
	}()
	snapFile := filepath.Join(dir, "snapshot")
	switch mode {
	case "backup":
		start := time.Now()
		_, items, stats := f.backup(acct, nil)
		out("backup", time.Since(start).Seconds())
		out("stored", stats.StoredBytes)
		out("items", len(items))
		os.WriteFile(snapFile, []byte(f.lastSnapshot), 0o600)
	case "restore":
		id, _ := os.ReadFile(snapFile)
		var items []blobstore.Item
		if err := st.Items(ctx, string(id), func(it blobstore.Item) error { items = append(items, it); return nil }); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, _, _ := f.backup(acct, items)
		out("incremental", time.Since(start).Seconds())
		if res.Added != 0 || res.Removed != 0 {
			t.Fatalf("no-change incremental: %+v", res)
		}
		start = time.Now()
		r1, err := Restore(ctx, acct, RestoreRequest{Items: items, Folder: "Restored"}, f.opener(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out("restore", time.Since(start).Seconds())
		if pf := os.Getenv("IMAPBACKUP_BENCH_MEMPROFILE"); pf != "" {
			if fh, err := os.Create(pf); err == nil {
				pprof.Lookup("allocs").WriteTo(fh, 0)
				fh.Close()
			}
		}
		start = time.Now()
		r2, err := Restore(ctx, acct, RestoreRequest{Items: items, Folder: "Restored"}, f.opener(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out("restore2", time.Since(start).Seconds())
		out("restored2", r2.Restored)
		out("skipped2", r2.Skipped)
		if r1.Restored != int64(len(items)-4) || r2.Restored != 0 || len(r1.Failed)+len(r2.Failed) != 0 {
			t.Fatalf("restores: %+v %+v", r1, r2)
		}
		// Count what the restored folders hold, on the server.
		ac, err := connect(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		var count uint32
		for _, it := range items {
			if it.Kind == KindFolder {
				st, err := ac.c.Status("Restored."+folderMeta(t, it).Mailbox, &imap.StatusOptions{NumMessages: true}).Wait()
				if err != nil {
					t.Fatal(err)
				}
				count += *st.NumMessages
			}
		}
		ac.close()
		out("count", count)
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			out("VmHWM", strings.TrimSpace(v))
		}
	}
}
