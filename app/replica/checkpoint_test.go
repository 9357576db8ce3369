package replica_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"backstop/app/replica"
)

// Why store.DB.Maintain skips its TRUNCATE checkpoint while replicating:
// Litestream's read transaction makes it wait out the whole busy timeout
// (holding the write lock, so every writer waits too) and then give up.
func TestTruncateCheckpointWaitsForLitestream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backstop.db")
	db := openAppDB(t, path)
	defer db.Close()
	r, err := replica.New(replica.Config{URL: "file://" + filepath.Join(t.TempDir(), "replica"), DBPath: path, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	for range 3 {
		if _, err := db.Exec("INSERT INTO notes (body) VALUES ('x')"); err != nil {
			t.Fatal(err)
		}
	}
	for r.Health().ReplicaTXID == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := db.Exec("INSERT INTO notes (body) VALUES ('y')"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "PRAGMA busy_timeout = 2000"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var busy, logN, done int
	err = conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logN, &done)
	took := time.Since(start)
	t.Logf("TRUNCATE beside Litestream: busy=%d log=%d checkpointed=%d err=%v after %v", busy, logN, done, err, took.Round(time.Millisecond))
	if busy != 1 && err == nil {
		t.Errorf("TRUNCATE completed beside Litestream (busy=%d): Maintain could run it", busy)
	}
	if took < 1500*time.Millisecond {
		t.Errorf("TRUNCATE gave up after %v, not the busy timeout", took)
	}
}
