package store

import (
	"context"
	"testing"
	"time"

	"backstop/app"
)

func TestMaintenanceRoundTrip(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	if _, err := db.Maintenance(ctx); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("empty: %v, want not found", err)
	}
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	_, err := db.UpdateMaintenance(ctx, func(m *app.Maintenance) (*app.Maintenance, error) {
		if m != nil {
			t.Errorf("fn got %+v, want nil", m)
		}
		return &app.Maintenance{Phase: app.MaintenanceFailed, TargetVersion: "1.5.0", StartsAt: app.AtPtr(&at),
			Error: app.Ptr("bad signature"), FromVersion: "1.4.0"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := db.Maintenance(ctx)
	if err != nil || m.Phase != app.MaintenanceFailed || m.TargetVersion != "1.5.0" || !m.StartsAt.Equal(at) ||
		m.Error == nil || *m.Error != "bad signature" || m.FromVersion != "1.4.0" {
		t.Fatalf("got %+v, %v", m, err)
	}
	if _, err := db.UpdateMaintenance(ctx, func(*app.Maintenance) (*app.Maintenance, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Maintenance(ctx); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("after delete: %v", err)
	}
	if s, err := db.Settings(ctx); err != nil || s.UpdateChannel != "stable" {
		t.Fatalf("settings disturbed: %+v %v", s, err)
	}
}
