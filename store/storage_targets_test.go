package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"backstop/app"
	"backstop/store/storetest"
)

func TestStorageTargets(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, "")
	a, b := storetest.Tenant(t, db, "Acme"), storetest.Tenant(t, db, "Beta")

	if _, err := db.TenantStorageTarget(ctx, a); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("no targets yet: %v, want not found", err)
	}
	local := &app.StorageTarget{Name: "Local disk", Kind: app.StorageKindLocal, Path: "/data/blobs"}
	if err := db.CreateStorageTarget(ctx, local); err != nil {
		t.Fatal(err)
	}
	if !local.Default || !app.HasPrefix(local.ID, app.PrefixStorage) {
		t.Fatalf("first target %+v: want the default with an st_ id", local)
	}
	s3 := &app.StorageTarget{Name: "Wasabi", Kind: app.StorageKindS3, Endpoint: "s3.example.com", Bucket: "bk",
		AccessKeyID: "AKIA1", SealedSecret: []byte("sealed"), TenantIDs: []string{b}}
	if err := db.CreateStorageTarget(ctx, s3); err != nil {
		t.Fatal(err)
	}
	if s3.Default {
		t.Fatal("second target became the default unasked")
	}
	for tenant, want := range map[string]string{a: local.ID, b: s3.ID} {
		if got, err := db.TenantStorageTarget(ctx, tenant); err != nil || got != want {
			t.Errorf("tenant %s on %s (%v), want %s", tenant, got, err, want)
		}
	}

	t.Run("read back, secret sealed, S3 flags", func(t *testing.T) {
		got, err := db.StorageTarget(ctx, s3.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.SealedSecret) != "sealed" || got.TLS == nil || !*got.TLS || got.PathStyle == nil || *got.PathStyle ||
			!slices.Equal(got.TenantIDs, []string{b}) || got.State != app.StorageOK || got.CheckedAt != nil {
			t.Errorf("read back %+v", got)
		}
		if _, err := db.StorageTarget(ctx, "st_nope"); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("unknown id: %v", err)
		}
	})

	t.Run("stored bytes per target and per tenant", func(t *testing.T) {
		err := db.WriteTx(ctx, func(tx *sql.Tx) error {
			for i, p := range []struct {
				tenant, target string
				size           int64
			}{{a, local.ID, 100}, {b, local.ID, 50}, {b, s3.ID, 7}} {
				if _, err := tx.ExecContext(ctx, `INSERT INTO blob_packs (tenant_id, pack_id, target_id, size, blobs, created_at)
					VALUES (?, ?, ?, ?, 1, 0)`, p.tenant, fmt.Sprint("pack", i), p.target, p.size); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		all, err := db.StorageTargets(ctx, app.StorageTargetFilter{})
		if err != nil || len(all) != 2 || all[0].StoredBytes != 150 || all[1].StoredBytes != 7 {
			t.Fatalf("all tenants: %+v %v", all, err)
		}
		// Tenant b's new data goes to the S3 target, but its older packs on
		// the local target keep that target among b's.
		mine, err := db.StorageTargets(ctx, app.StorageTargetFilter{ForTenant: b})
		if err != nil || len(mine) != 2 || mine[0].StoredBytes != 50 || mine[1].StoredBytes != 7 {
			t.Fatalf("tenant b: %+v %v", mine, err)
		}
		if one, _ := db.StorageTarget(ctx, local.ID); one.StoredBytes != 150 {
			t.Errorf("one target: %d stored", one.StoredBytes)
		}
		err = db.WriteTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "DELETE FROM blob_packs")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("state", func(t *testing.T) {
		free, used := int64(10), int64(90)
		msg := "only 10 bytes free"
		at := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
		if err := db.SaveStorageTargetState(ctx, local.ID, app.StorageTargetState{State: app.StorageFull,
			CapacityBytes: app.Ptr(int64(100)), UsedBytes: &used, FreeBytes: &free, CheckedAt: at, LastError: &msg}); err != nil {
			t.Fatal(err)
		}
		got, _ := db.StorageTarget(ctx, local.ID)
		if got.State != app.StorageFull || *got.FreeBytes != 10 || *got.CapacityBytes != 100 || got.LastError == nil ||
			*got.LastError != msg || !got.CheckedAt.Equal(at) {
			t.Errorf("state %+v", got)
		}
		if err := db.SaveStorageTargetState(ctx, "st_nope", app.StorageTargetState{State: app.StorageOK}); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("unknown id: %v", err)
		}
	})

	t.Run("exactly one default", func(t *testing.T) {
		_, err := db.UpdateStorageTarget(ctx, local.ID, func(t *app.StorageTarget) error { t.Default = false; return nil })
		if app.ErrorCode(err) != app.EINVALID {
			t.Fatalf("unsetting the default: %v", err)
		}
		got, err := db.UpdateStorageTarget(ctx, s3.ID, func(t *app.StorageTarget) error { t.Default = true; return nil })
		if err != nil || !got.Default {
			t.Fatalf("moving the default: %+v %v", got, err)
		}
		old, _ := db.StorageTarget(ctx, local.ID)
		if old.Default {
			t.Error("two defaults")
		}
		if id, _ := db.TenantStorageTarget(ctx, a); id != s3.ID {
			t.Errorf("unplaced tenant on %s, want the new default %s", id, s3.ID)
		}
		// Back, for the tests below.
		if _, err := db.UpdateStorageTarget(ctx, local.ID, func(t *app.StorageTarget) error { t.Default = true; return nil }); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("placement moves a tenant", func(t *testing.T) {
		third := &app.StorageTarget{Name: "NAS", Kind: app.StorageKindLocal, Path: "/mnt/nas", TenantIDs: []string{b, a, b}}
		if err := db.CreateStorageTarget(ctx, third); err != nil {
			t.Fatal(err)
		}
		got, _ := db.StorageTarget(ctx, s3.ID)
		if len(got.TenantIDs) != 0 {
			t.Errorf("tenant b still placed on the S3 target: %v", got.TenantIDs)
		}
		got, _ = db.StorageTarget(ctx, third.ID)
		if want := []string{a, b}; !slices.Equal(got.TenantIDs, slices.Sorted(slices.Values(want))) {
			t.Errorf("placed %v, want %v", got.TenantIDs, want)
		}
		got, err := db.UpdateStorageTarget(ctx, s3.ID, func(t *app.StorageTarget) error { t.TenantIDs = []string{a}; return nil })
		if err != nil || !slices.Equal(got.TenantIDs, []string{a}) {
			t.Fatalf("%+v %v", got, err)
		}
		got, _ = db.StorageTarget(ctx, third.ID)
		if !slices.Equal(got.TenantIDs, []string{b}) {
			t.Errorf("after moving a: %v", got.TenantIDs)
		}
		_, err = db.UpdateStorageTarget(ctx, s3.ID, func(t *app.StorageTarget) error { t.TenantIDs = []string{"tn_nope"}; return nil })
		if app.ErrorCode(err) != app.EINVALID {
			t.Errorf("unknown tenant: %v", err)
		}
		// A tenant sees only the targets serving it, and only itself placed.
		ts, err := db.StorageTargets(ctx, app.StorageTargetFilter{ForTenant: a})
		if err != nil || len(ts) != 1 || ts[0].ID != s3.ID || !slices.Equal(ts[0].TenantIDs, []string{a}) {
			t.Errorf("tenant a's targets: %v %v", ts, err)
		}
		all, err := db.StorageTargets(ctx, app.StorageTargetFilter{})
		if err != nil || len(all) != 3 {
			t.Fatalf("all targets: %d %v", len(all), err)
		}
		page, err := db.StorageTargets(ctx, app.StorageTargetFilter{AfterID: all[0].ID, Limit: 1})
		if err != nil || len(page) != 1 || page[0].ID != all[1].ID {
			t.Errorf("page after the first: %v %v", page, err)
		}
	})

	t.Run("appliance key download recorded once", func(t *testing.T) {
		at := time.Date(2026, 11, 21, 16, 0, 0, 0, time.UTC)
		earlier, err := db.RecordApplianceKeyDownload(ctx, app.ApplianceKeyDownload{At: at, UserID: "usr_1", UserEmail: "a@example.com"})
		if err != nil || earlier != nil {
			t.Fatalf("first download: %v %v", earlier, err)
		}
		earlier, err = db.RecordApplianceKeyDownload(ctx, app.ApplianceKeyDownload{At: at.Add(time.Hour), UserID: "usr_2", UserEmail: "b@example.com"})
		if err != nil || earlier == nil || earlier.UserEmail != "a@example.com" || !earlier.At.Equal(at) {
			t.Errorf("second download: %+v %v", earlier, err)
		}
	})
}
