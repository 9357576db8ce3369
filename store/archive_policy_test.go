package store

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
)

func TestArchiveRetentionAndHoldsSQL(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")

	if _, set, err := db.ArchiveRetention(ctx, tn.ID); err != nil || set {
		t.Fatalf("fresh retention: set %v, %v", set, err)
	}
	r := archive.Retention{DefaultDays: 10, Rules: []archive.RetentionRule{{Days: 1}}}
	r.Rules[0].Match.From = "@x.test"
	if err := db.SetArchiveRetention(ctx, tn.ID, r); err != nil {
		t.Fatal(err)
	}
	got, set, err := db.ArchiveRetention(ctx, tn.ID)
	if err != nil || !set || got.DefaultDays != 10 || len(got.Rules) != 1 || got.Rules[0].Match.From != "@x.test" {
		t.Fatalf("retention %+v %v %v", got, set, err)
	}

	from := clock.t.Add(-time.Hour)
	h := &archive.Hold{ID: app.NewID(archive.PrefixHold), TenantID: tn.ID, Name: "m", Custodians: []string{"a@b.test"},
		From: &from, Query: "invoice", CreatedAt: clock.t, CreatedBy: "usr_1", RecordIndex: 4}
	if err := db.WriteTx(ctx, func(tx *sql.Tx) error { return db.InsertArchiveHoldTx(ctx, tx, h) }); err != nil {
		t.Fatal(err)
	}
	back, err := db.ArchiveHold(ctx, tn.ID, h.ID)
	if err != nil || back.Name != "m" || back.Custodians[0] != "a@b.test" || !back.From.Equal(from) || back.To != nil ||
		back.RecordIndex != 4 || back.ReleasedAt != nil {
		t.Fatalf("hold %+v, %v", back, err)
	}
	if _, err := db.ArchiveHold(ctx, "tn_other", h.ID); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("another tenant's hold: %v", err)
	}
	at, idx := clock.t, int64(9)
	h.ReleasedAt, h.ReleaseReason, h.ReleasedBy, h.ReleaseRecordIndex = &at, "done", "usr_2", &idx
	release := func() error {
		return db.WriteTx(ctx, func(tx *sql.Tx) error { return db.ReleaseArchiveHoldTx(ctx, tx, h) })
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, release(), app.ECONFLICT)
	list, err := db.ArchiveHolds(ctx, tn.ID, "", 0)
	if err != nil || len(list) != 1 || list[0].ReleaseReason != "done" || *list[0].ReleaseRecordIndex != 9 {
		t.Fatalf("holds %+v, %v", list, err)
	}
	if list, _ := db.ArchiveHolds(ctx, tn.ID, h.ID, 10); len(list) != 0 {
		t.Fatalf("page before the only hold: %d", len(list))
	}
}

func TestArchiveSearchSQL(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	seedArchive(t, db, tn.ID, 300, now)
	q := archive.SearchQuery{TenantID: tn.ID, Limit: 7}
	seen := 0
	last := int64(1 << 62)
	for {
		rows, next, err := db.SearchArchiveMessages(ctx, q, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.RowID >= last {
				t.Fatalf("row %d after %d: not newest first", r.RowID, last)
			}
			last = r.RowID
			seen++
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	if seen != 300 {
		t.Fatalf("paged %d of 300", seen)
	}
	for _, bad := range []string{"x", "c1", "c.1", "r5"} {
		q.Cursor = bad
		if _, _, err := db.SearchArchiveMessages(ctx, q, ""); app.ErrorCode(err) != app.EINVALID {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
	// A raw FTS5 syntax error (never made by archive.FTSQuery) is a
	// validation error, not a 500.
	q.Cursor = ""
	if _, _, err := db.SearchArchiveMessages(ctx, q, `"unbalanced`); app.ErrorCode(err) != app.EINVALID {
		t.Errorf("fts syntax error: %v", err)
	}
	// A period bounds the text search.
	from, to := now.Add(-100*time.Minute), now.Add(-50*time.Minute)
	q.From, q.To, q.Limit = &from, &to, 1000
	rows, _, err := db.SearchArchiveMessages(ctx, q, archive.FTSQuery("invoice OR"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.CapturedAt.Before(from) || r.CapturedAt.After(to) {
			t.Fatalf("row outside the period: %v", r.CapturedAt)
		}
	}
	// Purged rows leave the index and the results.
	all, _, _ := db.SearchArchiveMessages(ctx, archive.SearchQuery{TenantID: tn.ID, Limit: 1000}, "")
	ids := []int64{all[0].RowID, all[1].RowID}
	if err := db.WriteTx(ctx, func(tx *sql.Tx) error { return db.MarkArchivePurgedTx(ctx, tx, tn.ID, ids, now) }); err != nil {
		t.Fatal(err)
	}
	if m, err := db.ArchiveFTSMatches(ctx, archive.FTSQuery(all[0].Subject), ids); err != nil || len(m) != 0 {
		t.Fatalf("purged rows still indexed: %v %v", m, err)
	}
	after, _, _ := db.SearchArchiveMessages(ctx, archive.SearchQuery{TenantID: tn.ID, Limit: 1000}, "")
	if len(after) != 298 {
		t.Fatalf("%d results after purging 2 of 300", len(after))
	}
	purged, err := db.ArchivePurgedSHA256(ctx, tn.ID, []string{all[0].SHA256, all[2].SHA256})
	if err != nil || !purged[all[0].SHA256] || purged[all[2].SHA256] {
		t.Fatalf("purged sha256 %v %v", purged, err)
	}
	err = db.WriteTx(ctx, func(tx *sql.Tx) error { return db.MarkArchivePurgedTx(ctx, tx, tn.ID, ids[:1], now) })
	wantCode(t, err, app.ECONFLICT)
}
