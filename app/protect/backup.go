package protect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/jobs"
)

// BackupKind is the job kind of protected-object backups: queue
// imap_backup, POST /backups with targetType protected_object and the
// daily schedules. Only IMAP objects have a backup in this version.
//
// A run opens the object's source, hands the engine a blob store writer
// and the previous snapshot's manifest (it backs up incrementally from
// it), commits the snapshot the engine's manifest describes, records each
// message the engine could not fetch as a failed item (the job ends
// partial), and records the object's facts (last backup, last success,
// last snapshot) and its source's state (failing with the reason after an
// IMAP failure, ok after a success).
func (m *Manager) BackupKind() jobs.Kind {
	return jobs.Kind{
		Action: app.ActionBackup, TargetType: app.TargetProtectedObject, Queue: app.QueueIMAPBackup,
		Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
			o, err := m.object(ctx, tenantID, targetID)
			if err != nil {
				return app.JobTarget{}, err
			}
			switch {
			case o.Kind != app.ObjectIMAP:
				return app.JobTarget{}, app.FieldError("body.targetId", "this version backs up IMAP objects only, not %s", o.Kind)
			case o.SourceID == "":
				return app.JobTarget{}, app.FieldError("body.targetId", "the object's source was deleted: its snapshots stay, but it cannot be backed up")
			case o.SourceState == app.SourceDisabled:
				return app.JobTarget{}, app.FieldError("body.targetId", "the object's source is disabled: enable it first")
			case !o.Protected:
				return app.JobTarget{}, app.FieldError("body.targetId", "the object is not protected: turn its protection on in the directory first")
			}
			return app.JobTarget{Type: app.TargetProtectedObject, ID: o.ID, DisplayName: o.DisplayName}, nil
		},
		Run:       m.runBackup,
		EventData: m.eventData,
	}
}

// object returns a protected object of the tenant ("" for any).
func (m *Manager) object(ctx context.Context, tenantID, id string) (*app.ProtectedObject, error) {
	o, err := m.cfg.Objects.ProtectedObject(ctx, id)
	if err != nil {
		return nil, err
	}
	if tenantID != "" && o.TenantID != tenantID {
		return nil, app.NotFound("protected object")
	}
	return o, nil
}

// eventData adds data.protectedObject to the webhook events of the
// object's jobs (as endpoint runs add data.endpoint).
func (m *Manager) eventData(ctx context.Context, j *app.Job) (map[string]any, error) {
	o, err := m.cfg.Objects.ProtectedObject(ctx, j.Target.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"protectedObject": o.Event()}, nil
}

func (m *Manager) runBackup(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
	j := run.Job
	o, err := m.cfg.Objects.ProtectedObject(ctx, j.Target.ID)
	if err != nil {
		return nil, err
	}
	if o.SourceID == "" || o.SourceState == app.SourceDisabled {
		return nil, app.Fail("source.unavailable", map[string]any{"protectedObjectId": o.ID, "sourceId": o.SourceID},
			errors.New("the object's source is deleted or disabled"))
	}
	src, err := m.cfg.Sources.Source(ctx, o.SourceID)
	if err != nil {
		return nil, err
	}
	acct, err := m.account(src)
	if err != nil {
		return nil, fmt.Errorf("opening the source's sealed password: %w", err)
	}
	run.Progress(ctx, app.JobProgress{Phase: "starting"})

	prev, err := m.previousItems(ctx, o.ID)
	if err != nil {
		return nil, err
	}
	if m.cfg.Engine.Backup == nil {
		return nil, m.backupFailed(ctx, o, src, acct.Password, errNoEngine)
	}
	w, err := m.cfg.Blobs.NewWriter(ctx, o.TenantID)
	if err != nil {
		return nil, m.backupFailed(ctx, o, src, acct.Password, err)
	}
	defer w.Close()
	// The engine's share of the work ends at 98 %: committing the snapshot
	// follows, so the bar never shows 100 % and then goes back.
	res, err := m.cfg.Engine.Backup(ctx, acct, w, prev, func(p app.JobProgress) {
		p.Percent = min(p.Percent, 98)
		run.Progress(ctx, p)
	})
	if err != nil {
		return nil, m.backupFailed(ctx, o, src, acct.Password, err)
	}
	run.Progress(ctx, app.JobProgress{Phase: "finishing", Percent: 99, ItemsDone: res.Messages, ItemsTotal: res.Messages})
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: o.ID, JobID: j.ID, AddedItems: res.Added,
		RemovedItems: res.Removed}, func(yield func(blobstore.Item) error) error {
		for _, it := range res.Items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, m.backupFailed(ctx, o, src, acct.Password, err)
	}
	for _, f := range res.Failed {
		ref := f.ItemID
		if ref == "" {
			ref = fmt.Sprintf("%s/%d", f.Folder, f.UID)
		}
		if err := run.ItemFailed(ctx, ref, fmt.Sprintf("%s UID %d", f.Folder, f.UID), f.Err); err != nil {
			return nil, err
		}
	}
	now := m.cfg.Now()
	state := app.JobSucceeded
	if len(res.Failed) > 0 {
		state = app.JobPartial
	}
	if _, err := m.cfg.Objects.UpdateProtectedObject(ctx, o.ID, func(o *app.ProtectedObject) error {
		o.LastBackupAt, o.LastBackupState, o.LastSuccessAt = &now, state, &now
		o.LastSnapshotID, o.LastSnapshotAt = snap.ID, &snap.At.Time
		o.LastSnapshotItems, o.LastSnapshotBytes = res.Messages, snap.Bytes
		return nil
	}); err != nil {
		return nil, err
	}
	m.setSourceState(ctx, src.ID, app.SourceOK, "")
	m.log.Info("backup finished", "job_id", j.ID, "protected_object_id", o.ID, "snapshot_id", snap.ID,
		"messages", res.Messages, "added", res.Added, "removed", res.Removed, "failed", len(res.Failed))
	return &jobs.Outcome{SnapshotID: snap.ID, Progress: &app.JobProgress{Phase: "done", Percent: 100,
		ItemsDone: res.Messages, ItemsTotal: res.Messages, BytesDone: snap.Bytes, BytesTotal: snap.Bytes}}, nil
}

// previousItems is the manifest of the object's newest snapshot, the
// engine's starting point; nil before the first backup.
func (m *Manager) previousItems(ctx context.Context, objectID string) ([]blobstore.Item, error) {
	snaps, err := m.cfg.Blobs.Snapshots(ctx, app.SnapshotFilter{ProtectedObjectID: objectID, Limit: 1})
	if err != nil || len(snaps) == 0 {
		return nil, err
	}
	var items []blobstore.Item
	err = m.cfg.Blobs.Items(ctx, snaps[0].ID, func(it blobstore.Item) error {
		items = append(items, it)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the previous snapshot %s: %w", snaps[0].ID, err)
	}
	return items, nil
}

// backupFailed records a failed backup on the object and, for an IMAP
// cause, on its source, and returns err for the runner. A run cut off by
// the runner closing records nothing: it is re-run, not failed.
func (m *Manager) backupFailed(ctx context.Context, o *app.ProtectedObject, src *app.Source, password string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	now := m.cfg.Now()
	if _, uerr := m.cfg.Objects.UpdateProtectedObject(ctx, o.ID, func(o *app.ProtectedObject) error {
		o.LastBackupAt, o.LastBackupState = &now, app.JobFailed
		return nil
	}); uerr != nil {
		m.log.Error("recording a failed backup failed", "protected_object_id", o.ID, "error", uerr)
	}
	var fe *app.FailureError
	if errors.As(err, &fe) && strings.HasPrefix(fe.Code, "imap.") {
		f := app.FailureFrom(err, "backup", now)
		msg := f.Code
		if c, ok := app.LookupFailureCode(f.Code); ok {
			msg = c.Title
		}
		if first, _, _ := strings.Cut(f.Details, "\n"); first != "" {
			msg += ": " + first
		}
		if password != "" {
			msg = strings.ReplaceAll(msg, password, "[redacted]")
		}
		m.setSourceState(ctx, src.ID, app.SourceFailing, msg)
	}
	return err
}

func (m *Manager) setSourceState(ctx context.Context, id, state, lastError string) {
	if _, err := m.cfg.Sources.UpdateSource(ctx, id, func(s *app.Source) error {
		s.State, s.LastError = state, lastError
		return nil
	}); err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		m.log.Error("recording the source's state failed", "source_id", id, "error", err)
	}
}
