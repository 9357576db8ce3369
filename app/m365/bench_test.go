package m365

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
	"backstop/app/graph/graphtest"
)

// The benchmarks run against the fake with Graph's 50 ms latency and
// Outlook's 4 requests per mailbox. Each runs its scenario once per b.N
// (use -benchtime=1x); they take about a minute together:
//
//	go test -run '^$' -bench . -benchtime=1x ./app/m365/
const (
	benchMailboxes = 50
	benchMessages  = 1000
	benchUsers     = 10000
)

func benchOptions() graphtest.Options {
	return graphtest.Options{Latency: 50 * time.Millisecond, MailboxConcurrency: 4}
}

// benchMIME is a 2-10 KB text message.
func benchMIME(rng *rand.Rand, user, i int) []byte {
	size := 2<<10 + rng.IntN(8<<10)
	var b strings.Builder
	fmt.Fprintf(&b, "From: Sender %d <s%d@example.com>\r\nTo: u%d@example.com\r\nSubject: Bench %d/%d\r\n"+
		"Date: Mon, 02 Jan 2006 15:04:05 +0000\r\nMessage-ID: <bench.%d.%d@example.com>\r\nMIME-Version: 1.0\r\n\r\n",
		i%97, i%97, user, user, i, user, i)
	const letters = "abcdefghijklmnopqrstuvwxyz      ABCDEFGHIJ0123456789.,"
	line := make([]byte, 76)
	for b.Len() < size {
		for j := range line {
			line[j] = letters[rng.IntN(len(letters))]
		}
		b.Write(line)
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

func populateMailboxes(fake *graphtest.Server, n, msgs int) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	users := make([]string, n)
	for u := range n {
		users[u] = fake.AddUser(graphtest.User{DisplayName: fmt.Sprintf("Bench %d", u)})
		inbox := fake.WellKnownFolder(users[u], "inbox")
		sent := fake.WellKnownFolder(users[u], "sentitems")
		for i := range msgs {
			folder := inbox
			if i%5 == 0 {
				folder = sent
			}
			fake.AddMessage(users[u], folder, benchMIME(rng, u, i), received.Add(time.Duration(i)*time.Second))
		}
	}
	return users
}

// BenchmarkMailboxes measures (a) one mailbox's full backup, (b) 50
// mailboxes in parallel (ratio to (a), target ≤ 2×, no throttling
// violation, peak RSS ≤ 128 MiB in a child process), (c) the incremental
// of the 50 unchanged mailboxes (< 10 s).
func BenchmarkMailboxes(b *testing.B) {
	fake := graphtest.New(testTenant, benchOptions())
	defer fake.Close()
	users := populateMailboxes(fake, benchMailboxes, benchMessages)
	for range b.N {
		dir := b.TempDir()
		st, tenant := openStore(b, dir)
		c := newClient(b, fake, testTenant.ClientSecret, nil)
		start := time.Now()
		res, _, _, err := backupInto(context.Background(), st, tenant, c, BackupMailbox, users[0], nil)
		if err != nil || res.Count != benchMessages {
			b.Fatalf("one mailbox: %v %+v", err, res)
		}
		one := time.Since(start)

		kv := runBenchChild(b, fake, users)
		var full, inc, hwm float64
		fmt.Sscan(kv["full"], &full)
		fmt.Sscan(kv["incremental"], &inc)
		fmt.Sscan(strings.TrimSuffix(kv["VmHWM"], " kB"), &hwm)
		stats := fake.Stats()
		ratio := full / one.Seconds()
		b.ReportMetric(one.Seconds(), "s/one-mailbox")
		b.ReportMetric(full, "s/50-mailboxes")
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(inc, "s/50-incremental")
		b.ReportMetric(hwm/1024, "MiB-peak-RSS")
		b.Logf("child memory: %s; soft limit %s", kv["mem"], kv["softLimit"])
		b.Logf("child peak RSS after the full round: %s; %s", kv["fullVmHWM"], kv["fullLive"])
		b.Logf("one mailbox × %d: %.2f s; %d mailboxes in parallel: %.2f s (%.2f×); incremental of %d unchanged: %.2f s; child peak RSS %.0f MiB; fake stats %+v",
			benchMessages, one.Seconds(), benchMailboxes, full, ratio, benchMailboxes, inc, hwm/1024, stats)
		if stats.Violations != 0 {
			b.Fatalf("%d throttling violations", stats.Violations)
		}
		if ratio > 2 {
			b.Errorf("50 mailboxes took %.2f× one mailbox (target ≤ 2×)", ratio)
		}
		if inc > 10 {
			b.Errorf("incremental of 50 mailboxes took %.1f s (target < 10 s)", inc)
		}
		if hwm > 128*1024 {
			b.Errorf("peak RSS %.0f MiB (target ≤ 128 MiB)", hwm/1024)
		}
	}
}

// BenchmarkSyncDirectory measures a directory of 10,000 users (< 30 s).
func BenchmarkSyncDirectory(b *testing.B) {
	fake := graphtest.New(testTenant, benchOptions())
	defer fake.Close()
	sku := fake.Sku("ENTERPRISEPACK")
	for i := range benchUsers {
		u := graphtest.User{DisplayName: fmt.Sprintf("User %d", i)}
		if i%2 == 0 {
			u.Licenses = []string{sku}
		}
		if i%50 == 0 {
			u.Purpose = "shared"
		}
		fake.AddUser(u)
	}
	c := newClient(b, fake, testTenant.ClientSecret, nil)
	for range b.N {
		start := time.Now()
		users, err := SyncDirectory(context.Background(), c, nil)
		if err != nil || len(users) != benchUsers {
			b.Fatalf("%v, %d users", err, len(users))
		}
		d := time.Since(start)
		b.ReportMetric(d.Seconds(), "s/10k-users")
		b.Logf("SyncDirectory of %d users: %.2f s", benchUsers, d.Seconds())
		if d > 30*time.Second {
			b.Errorf("took %v (target < 30 s)", d)
		}
	}
}

// runBenchChild runs the parallel backups in a child process (the test
// binary again), so its VmHWM is the backup side's peak RSS alone.
func runBenchChild(b *testing.B, fake *graphtest.Server, users []string) map[string]string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchChild$", "-test.v")
	cmd.Env = append(os.Environ(), "M365_BENCH_CHILD=1", "M365_BENCH_GRAPH="+fake.GraphURL(),
		"M365_BENCH_LOGIN="+fake.LoginURL(), "M365_BENCH_USERS="+strings.Join(users, ","), "M365_BENCH_DATA="+b.TempDir())
	out, err := cmd.CombinedOutput()
	if p := os.Getenv("M365_BENCH_CHILD_OUT"); p != "" { // e.g. with GODEBUG=gctrace=1
		os.WriteFile(p, out, 0o644)
	}
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	kv := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.HasPrefix(k, "bench.") {
			kv[strings.TrimPrefix(k, "bench.")] = v
		}
	}
	return kv
}

// TestBenchChild is the backup side of BenchmarkMailboxes: every mailbox
// in parallel through one shared graph.Limits, then an incremental of
// each; it prints its timings and VmHWM.
func TestBenchChild(t *testing.T) {
	if os.Getenv("M365_BENCH_CHILD") == "" {
		t.Skip("started by BenchmarkMailboxes only")
	}
	// The memory soft limit serve runs with when nothing configures it
	// (SERVICE_MEMORY_SOFT_LIMIT_MIB overrides it as it does for serve).
	mib := app.DefaultConfig().Memory.SoftLimitMiB
	if v := os.Getenv("SERVICE_MEMORY_SOFT_LIMIT_MIB"); v != "" {
		fmt.Sscan(v, &mib)
	}
	if limit := app.ApplyMemoryLimit(mib); limit == math.MaxInt64 {
		fmt.Printf("bench.softLimit=none\n")
	} else {
		fmt.Printf("bench.softLimit=%d MiB\n", limit>>20)
	}
	st, tenant := openStore(t, os.Getenv("M365_BENCH_DATA"))
	users := strings.Split(os.Getenv("M365_BENCH_USERS"), ",")
	c, err := graph.New(graph.Config{GraphURL: os.Getenv("M365_BENCH_GRAPH"), LoginURL: os.Getenv("M365_BENCH_LOGIN"),
		AzureTenantID: testTenant.AzureTenantID, ClientID: testTenant.ClientID, ClientSecret: testTenant.ClientSecret,
		Limits: graph.NewLimits(graph.DefaultMaxConcurrency)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stopWatch := watchLiveHeap()
	// As the appliance runs a job: the previous manifest is read from the
	// store when the job starts, and the result is dropped once committed
	// (only the snapshot's id is kept for the next round).
	run := func(prev map[string]string) (time.Duration, map[string]string) {
		out := map[string]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for _, u := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prevItems, err := snapshotItems(ctx, st, prev[u])
				if err != nil {
					t.Errorf("%s: %v", u, err)
					return
				}
				res, snap, err := backupCommit(ctx, st, tenant, c, u, prevItems)
				if err != nil || res.Count != benchMessages {
					t.Errorf("%s: %v %+v", u, err, res)
					return
				}
				mu.Lock()
				out[u] = snap.ID
				mu.Unlock()
			}()
		}
		wg.Wait()
		return time.Since(start), out
	}
	full, snaps := run(nil)
	fmt.Printf("bench.fullVmHWM=%s\n", vmHWM())
	fmt.Printf("bench.fullLive=%s\n", stopWatch())
	if os.Getenv("M365_BENCH_PROFILE") != "" {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("bench.mem=heapInuse %d MiB, heapSys %d MiB, stack %d MiB, sys %d MiB, goroutines %d\n",
			ms.HeapInuse>>20, ms.HeapSys>>20, ms.StackInuse>>20, ms.Sys>>20, runtime.NumGoroutine())
		f, _ := os.Create(os.Getenv("M365_BENCH_PROFILE"))
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	inc, _ := run(snaps)
	fmt.Printf("bench.full=%.3f\nbench.incremental=%.3f\n", full.Seconds(), inc.Seconds())
	fmt.Printf("bench.VmHWM=%s\n", vmHWM())
}

// watchLiveHeap samples the live heap (as of the last GC) every 50 ms
// and, with M365_BENCH_PROFILE set, writes a heap profile to
// M365_BENCH_PROFILE.peak whenever the live heap reaches a new high (10 %
// above the last one written). The returned func stops it and says the
// highest live heap and the GC cycles so far.
func watchLiveHeap() func() string {
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	stop, done := make(chan struct{}), make(chan struct{})
	var peak, written uint64
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			metrics.Read(samples)
			live := samples[0].Value.Uint64()
			peak = max(peak, live)
			if p := os.Getenv("M365_BENCH_PROFILE"); p != "" && live > written+written/10 {
				written = live
				if f, err := os.Create(p + ".peak"); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}
	}()
	return func() string {
		close(stop)
		<-done
		metrics.Read(samples)
		return fmt.Sprintf("peak live heap %d MiB, %d GC cycles", peak>>20, samples[1].Value.Uint64())
	}
}

func vmHWM() string {
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// backupCommit is a backup and its commit, as the protected-object layer
// runs it (without reading the manifest back).
func backupCommit(ctx context.Context, st *blobstore.Store, tenant string, c *graph.Client, user string, prev []blobstore.Item) (*BackupResult, *app.Snapshot, error) {
	w, err := st.NewWriter(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	res, err := BackupMailbox(ctx, c, user, w, prev, nil)
	if err != nil {
		return nil, nil, err
	}
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: "po_" + user}, func(yield func(blobstore.Item) error) error {
		for _, it := range res.Items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	})
	return res, snap, err
}

// snapshotItems is a snapshot's manifest, read as the protected-object
// layer reads the previous one (nil for none).
func snapshotItems(ctx context.Context, st *blobstore.Store, snapshotID string) ([]blobstore.Item, error) {
	if snapshotID == "" {
		return nil, nil
	}
	var items []blobstore.Item
	err := st.Items(ctx, snapshotID, func(it blobstore.Item) error {
		items = append(items, it)
		return nil
	})
	return items, err
}
