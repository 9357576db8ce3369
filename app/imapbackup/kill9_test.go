package imapbackup

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/store/storetest"
)

// TestKill9 kills a process in the middle of a backup and, later, of a
// restore (SIGKILL, no chance to clean up), then runs the same work again
// in this process: the backup completes with every message and no
// snapshot references missing data; the restore ends with every message
// exactly once.
func TestKill9(t *testing.T) {
	f := newFixture(t)
	date := time.Now().Add(-time.Hour)
	for i := range 3000 {
		f.srv.Deliver("alice", "INBOX", testMessage(i, 20000), "S", date)
	}

	// A backup killed after 1,000 messages leaves no snapshot and no
	// damage; the next one completes.
	f.killWorker("backup", 1000)
	snaps, err := f.store.Snapshots(context.Background(), app.SnapshotFilter{TenantID: f.tenant})
	if err != nil || len(snaps) != 0 {
		t.Fatalf("a killed backup left snapshots: %v %v", snaps, err)
	}
	res, items, _ := f.backup(f.acct, nil)
	if res.Messages != 3000 {
		t.Fatalf("backup after the kill: %d messages", res.Messages)
	}
	ctx := context.Background()
	if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil { // removes the killed run's packs
		t.Fatal(err)
	}
	sc, err := f.store.VerifySample(ctx, f.lastSnapshot, 0)
	if err != nil || sc.Matched != 3000 || sc.Mismatched != 0 {
		t.Fatalf("snapshot after the kill: %+v %v", sc, err)
	}
	if pc, err := f.store.CheckPacks(ctx, f.tenant, time.Time{}); err != nil || len(pc.Damaged) != 0 {
		t.Fatalf("packs after the kill: %+v %v", pc, err)
	}

	// A restore killed after 1,000 appends, then run again: no duplicates.
	os.WriteFile(filepath.Join(f.dir, "snapshot"), []byte(f.lastSnapshot), 0o600)
	f.killWorker("restore", 1000)
	c := f.client()
	partial := len(f.messages(c, "Restored.INBOX"))
	t.Logf("%d of 3000 messages restored before the kill", partial)
	if partial == 0 || partial >= 3000 {
		t.Fatalf("%d messages restored before the kill", partial)
	}
	r, err := Restore(ctx, f.acct, RestoreRequest{Items: items, Folder: "Restored"}, f.opener(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Restored+r.Skipped != 3000 || r.Skipped < int64(partial) {
		t.Fatalf("restore after the kill: %+v (after %d)", r, partial)
	}
	f.restoredMatches(items, "Restored")
}

// killWorker runs TestKill9Worker in a child process doing mode on the
// fixture's data directory and Dovecot, and SIGKILLs it once it reports
// n items done.
func (f *fixture) killWorker(mode string, n int64) {
	f.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Worker$")
	cmd.Env = append(os.Environ(), "IMAPBACKUP_KILL9="+mode, "IMAPBACKUP_KILL9_DIR="+f.dir,
		"IMAPBACKUP_KILL9_TENANT="+f.tenant, fmt.Sprintf("IMAPBACKUP_KILL9_PORT=%d", f.srv.Port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "complete" && !killed {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			f.t.Fatalf("the %s worker completed before it was killed", mode)
		}
		var done int64
		if _, err := fmt.Sscanf(sc.Text(), "done %d", &done); err == nil && done >= n && !killed {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed || !strings.Contains(fmt.Sprint(err), "killed") {
		f.t.Fatalf("the %s worker was not killed mid-way (killed %v): %v", mode, killed, err)
	}
}

// TestKill9Worker is the process TestKill9 kills; it does nothing unless
// started by it.
func TestKill9Worker(t *testing.T) {
	mode := os.Getenv("IMAPBACKUP_KILL9")
	if mode == "" {
		t.Skip("started by TestKill9 only")
	}
	dir := os.Getenv("IMAPBACKUP_KILL9_DIR")
	var port int
	fmt.Sscan(os.Getenv("IMAPBACKUP_KILL9_PORT"), &port)
	acct := Account{Host: "127.0.0.1", Port: port, Security: SecurityNone, Username: "alice", Password: "secret"}
	db := storetest.Open(t, dir)
	local, err := blobstore.NewLocal(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := blobstore.LoadApplianceKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := blobstore.New(blobstore.Config{Key: key, Catalog: db, Targets: &targets{b: local}, PackSize: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tenant := os.Getenv("IMAPBACKUP_KILL9_TENANT")
	ctx := context.Background()
	progress := func(p app.JobProgress) { fmt.Printf("done %d\n", p.ItemsDone) }
	switch mode {
	case "backup":
		w, err := st.NewWriter(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Backup(ctx, acct, w, nil, progress)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: "po_test"}, func(yield func(blobstore.Item) error) error {
			for _, it := range res.Items {
				if err := yield(it); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	case "restore":
		id, _ := os.ReadFile(filepath.Join(dir, "snapshot"))
		var items []blobstore.Item
		if err := st.Items(ctx, string(id), func(it blobstore.Item) error { items = append(items, it); return nil }); err != nil {
			t.Fatal(err)
		}
		open := func(ctx context.Context, c blobstore.Content) (io.ReadCloser, error) { return st.Open(ctx, tenant, c) }
		if _, err := Restore(ctx, acct, RestoreRequest{Items: items, Folder: "Restored"}, open, progress); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("complete") // the parent fails: its kill came too late
	time.Sleep(time.Minute)
}
