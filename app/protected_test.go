package app_test

import (
	"testing"
	"time"

	"backstop/app"
)

func TestProtectedObjectView(t *testing.T) {
	now := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	base := func() app.ProtectedObject {
		return app.ProtectedObject{ID: "po_1", TenantID: "tn_1", Kind: app.ObjectIMAP, SourceKind: app.SourceIMAP, SourceID: "src_1",
			Protected: true, CreatedAt: now.Add(-72 * time.Hour), SourceState: app.SourceOK, SourceSchedule: "0 2 * * *",
			LastSuccessAt: ago(2 * time.Hour), LastBackupAt: ago(2 * time.Hour), LastBackupState: app.JobSucceeded,
			LastSnapshotID: "sn_2", VerifyState: app.VerifyPassed, VerifyPassedSnapshotID: "sn_2", VerifyCheckedAt: ago(time.Hour)}
	}
	for _, tc := range []struct {
		name      string
		edit      func(o *app.ProtectedObject)
		readiness string
		overdue   bool
		attention string
	}{
		{"green", func(o *app.ProtectedObject) {}, app.ReadinessGreen, false, ""},
		{"no backup yet", func(o *app.ProtectedObject) {
			o.LastSnapshotID, o.LastSuccessAt, o.VerifyState, o.VerifyPassedSnapshotID, o.CreatedAt = "", nil, "", "", now
		}, app.ReadinessNoBackup, false, ""},
		{"unverified", func(o *app.ProtectedObject) { o.VerifyState, o.VerifyPassedSnapshotID = "", "" }, app.ReadinessUnverified, false, ""},
		{"older snapshot verified", func(o *app.ProtectedObject) { o.VerifyPassedSnapshotID = "sn_1" }, app.ReadinessYellow, false, ""},
		{"overdue", func(o *app.ProtectedObject) { o.LastSuccessAt = ago(37 * time.Hour) }, app.ReadinessYellow, true, app.AttentionBackupOverdue},
		{"not overdue within grace", func(o *app.ProtectedObject) { o.LastSuccessAt = ago(35 * time.Hour) }, app.ReadinessGreen, false, ""},
		{"default schedule is daily", func(o *app.ProtectedObject) { o.SourceSchedule, o.LastSuccessAt = "", ago(37*time.Hour) }, app.ReadinessYellow, true, app.AttentionBackupOverdue},
		{"last backup failed", func(o *app.ProtectedObject) { o.LastBackupState = app.JobFailed }, app.ReadinessGreen, false, app.AttentionLastBackupFailed},
		{"source failing beats last backup failed", func(o *app.ProtectedObject) {
			o.LastBackupState, o.SourceState = app.JobFailed, app.SourceFailing
		}, app.ReadinessGreen, false, app.AttentionSourceUnreachable},
		{"verify failed", func(o *app.ProtectedObject) { o.VerifyState, o.SourceState = app.VerifyFailed, app.SourceFailing }, app.ReadinessRed, false, app.AttentionRestoreTestFailed},
		{"damaged beats everything", func(o *app.ProtectedObject) {
			o.RepositoryDamaged, o.VerifyState, o.LastBackupState = true, app.VerifyFailed, app.JobFailed
		}, app.ReadinessRed, false, app.AttentionRepositoryDamaged},
		{"unprotected: no backup attention, never overdue", func(o *app.ProtectedObject) {
			o.Protected, o.LastBackupState, o.LastSuccessAt = false, app.JobFailed, ago(100*time.Hour)
		}, app.ReadinessGreen, false, ""},
		{"unprotected but damaged", func(o *app.ProtectedObject) { o.Protected, o.RepositoryDamaged = false, true }, app.ReadinessRed, false, app.AttentionRepositoryDamaged},
		{"source disabled: not expected to back up", func(o *app.ProtectedObject) {
			o.SourceState, o.LastSuccessAt = app.SourceDisabled, ago(100*time.Hour)
		}, app.ReadinessGreen, false, ""},
		{"source deleted", func(o *app.ProtectedObject) { o.SourceID, o.SourceState, o.Protected = "", "", false }, app.ReadinessGreen, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.edit(&o)
			v := o.View(now)
			att := ""
			if v.Attention != nil {
				att = *v.Attention
			}
			if v.Readiness.State != tc.readiness || v.Readiness.Overdue != tc.overdue || att != tc.attention {
				t.Errorf("readiness %s overdue %v attention %q; want %s %v %q", v.Readiness.State, v.Readiness.Overdue, att,
					tc.readiness, tc.overdue, tc.attention)
			}
		})
	}
	v := func() app.ProtectedObjectView { o := base(); return o.View(now) }()
	if v.LastSnapshot == nil || v.SourceID == nil || *v.SourceID != "src_1" {
		t.Errorf("view %+v", v)
	}
	c := app.CountProtectedObjects([]app.ProtectedObjectView{v, {Kind: app.ObjectMailbox, Attention: app.Ptr("x")}, {Kind: app.ObjectDrive}})
	if c != (app.ProtectedCounts{Total: 3, Mailboxes: 1, Drives: 1, IMAP: 1, NeedingAttention: 1}) {
		t.Errorf("counts %+v", c)
	}
}
