package archive_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
)

// attackFixture has five messages captured and a checkpoint of each size
// (so roll-backs and forks have checkpoints to contradict).
func attackFixture(t *testing.T, blobs bool) (*fixture, []*archive.Message) {
	f := newFixture(t, opts{every: time.Hour, blobs: blobs})
	ctx := context.Background()
	ch := f.channel()
	var ms []*archive.Message
	for i := 0; i < 5; i++ {
		m, err := f.svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(testMessage(i, 3000+i)))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		if _, err := f.svc.Checkpoint(ctx, f.tenant); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil {
		t.Fatalf("clean archive: %v", err)
	}
	return f, ms
}

func (f *fixture) exec(q string, args ...any) {
	f.t.Helper()
	if err := f.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(q, args...)
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) wantBroken(code string) {
	f.t.Helper()
	ctx := context.Background()
	rep, err := f.svc.VerifyChain(ctx, f.tenant, "job_attack", nil)
	var fe *app.FailureError
	if err == nil || !asFailure(err, &fe) || fe.Code != code {
		f.t.Fatalf("verify: %v, want %s (report %+v)", err, code, rep)
	}
	st, _ := f.db.ArchiveState(ctx, f.tenant)
	if st.State != archive.ChainBroken || st.BrokenReason == "" || st.LastVerifyJob != "job_attack" {
		f.t.Fatalf("state %+v", st)
	}
	f.t.Logf("detected: %s", st.BrokenReason)
}

func asFailure(err error, fe **app.FailureError) bool {
	for e := err; e != nil; {
		if x, ok := e.(*app.FailureError); ok {
			*fe = x
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

func TestVerifyDetectsAttacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blobs  bool
		code   string
		attack func(f *fixture, ms []*archive.Message)
	}{
		{"changed byte in a spool segment", false, app.CodeArchiveMessageMismatch, func(f *fixture, ms []*archive.Message) {
			p, off, _ := f.spoolSlice(ms[2])
			fh, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				f.t.Fatal(err)
			}
			defer fh.Close()
			b := make([]byte, 1)
			fh.ReadAt(b, off+100)
			b[0] ^= 1
			fh.WriteAt(b, off+100)
		}},
		{"message cut from its spool segment", false, app.CodeArchiveMessageMismatch, func(f *fixture, ms []*archive.Message) {
			p, off, _ := f.spoolSlice(ms[4])
			os.Truncate(p, off+10)
		}},
		{"spool segment deleted", false, app.CodeArchiveMessageMismatch, func(f *fixture, ms []*archive.Message) {
			p, _, _ := f.spoolSlice(ms[1])
			os.Remove(p)
		}},
		{"row pointed at another message's slice", false, app.CodeArchiveMessageMismatch, func(f *fixture, ms []*archive.Message) {
			_, off, n := f.spoolSlice(ms[0])
			f.exec(`UPDATE archive_messages SET spool_offset = ?, spool_length = ? WHERE id = ?`, off, n, ms[3].ID)
		}},
		{"changed byte in the blob store", true, app.CodeArchiveMessageMismatch, func(f *fixture, ms []*archive.Message) {
			// Point the message at another message's blobs: its bytes change.
			var other string
			f.db.Reader().QueryRow(`SELECT content FROM archive_messages WHERE id = ?`, ms[0].ID).Scan(&other)
			f.exec(`UPDATE archive_messages SET content = ? WHERE id = ?`, other, ms[3].ID)
		}},
		{"message deleted from the blob store", true, app.CodeArchiveMessageMismatch, func(f *fixture, ms []*archive.Message) {
			filepath.Walk(filepath.Join(f.dir, "blobs"), func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() && strings.Contains(p, "/packs/") {
					os.Remove(p)
				}
				return nil
			})
		}},
		{"record row changed", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			f.exec(`UPDATE archive_records SET record = CAST(replace(CAST(record AS TEXT), 'size 30', 'size 99') AS BLOB) WHERE idx = 1`)
		}},
		{"record and message changed together", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			f.exec(`UPDATE archive_records SET record = CAST(replace(CAST(record AS TEXT), ?, ?) AS BLOB) WHERE idx = 2`, ms[2].SHA256, strings.Repeat("0", 64))
			f.exec(`UPDATE archive_messages SET sha256 = ? WHERE id = ?`, strings.Repeat("0", 64), ms[2].ID)
		}},
		{"records reordered", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			f.exec(`UPDATE archive_records SET idx = -1 WHERE idx = 1`)
			f.exec(`UPDATE archive_records SET idx = 1 WHERE idx = 3`)
			f.exec(`UPDATE archive_records SET idx = 3 WHERE idx = -1`)
		}},
		{"back-dated record inserted", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			// Shift records 2.. up by one, insert a copy of record 0 (older time) at 2.
			for i := 4; i >= 2; i-- {
				f.exec(`UPDATE archive_records SET idx = idx + 1 WHERE idx = ?`, i)
			}
			f.exec(`INSERT INTO archive_records (tenant_id, idx, type, at, message_id, record)
				SELECT tenant_id, 2, type, at, message_id, record FROM archive_records WHERE idx = 0`)
		}},
		{"log rolled back", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			f.exec(`DELETE FROM archive_records WHERE idx >= 3`)
			f.exec(`DELETE FROM archive_hashes WHERE hidx >= ?`, 4) // StoredHashIndex(0, 3) = 4
			f.exec(`DELETE FROM archive_messages WHERE record_index >= 3`)
		}},
		{"fork: a checkpoint of the same size with another root", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			f.exec(`UPDATE archive_checkpoints SET root = zeroblob(32) WHERE size = 3`)
		}},
		{"checkpoint note replaced", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			f.exec(`UPDATE archive_checkpoints SET note = (SELECT note FROM archive_checkpoints WHERE size = 2) WHERE size = 3`)
		}},
		{"message purged without a tombstone", false, app.CodeArchiveChainBroken, func(f *fixture, ms []*archive.Message) {
			f.exec(`UPDATE archive_messages SET purged_at = 1 WHERE id = ?`, ms[0].ID)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ms := attackFixture(t, tc.blobs)
			if tc.blobs {
				f.waitMoved(ms)
			}
			f.stop()
			tc.attack(f, ms)
			f.wantBroken(tc.code)
		})
	}
}

// spoolSlice is where a message's bytes are in its spool segment.
func (f *fixture) spoolSlice(m *archive.Message) (path string, off, n int64) {
	f.t.Helper()
	sm, err := f.db.ArchiveMessage(context.Background(), f.tenant, m.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	if sm.Spool.Segment == "" || sm.Spool.Length != m.Size {
		f.t.Fatalf("message %s: spool slice %+v", m.ID, sm.Spool)
	}
	return filepath.Join(f.dir, "archive", "spool", f.tenant, sm.Spool.Segment), sm.Spool.Offset, sm.Spool.Length
}

func (f *fixture) waitMoved(ms []*archive.Message) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range ms {
		for {
			sm, err := f.db.ArchiveMessage(context.Background(), f.tenant, m.ID)
			if err != nil {
				f.t.Fatal(err)
			}
			if sm.Content != "" {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatal("not moved")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
