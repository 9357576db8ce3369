package protect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
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
		QueueFor: m.backupQueue, Queues: []string{app.QueueMailboxBackup, app.QueueDriveBackup},
		Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
			o, err := m.object(ctx, tenantID, targetID)
			if err != nil {
				return app.JobTarget{}, err
			}
			switch {
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

// backupRun is what one engine's backup gave, in the common shape.
type backupRun struct {
	items                 []blobstore.Item
	count, added, removed int64
	failed                []itemFailure
}

type itemFailure struct {
	ref, name string
	err       error
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
	run.Progress(ctx, app.JobProgress{Phase: "starting"})
	prev, err := m.previousItems(ctx, o.ID)
	if err != nil {
		return nil, err
	}
	// The engine's share of the work ends at 98 %: committing the snapshot
	// follows, so the bar never shows 100 % and then goes back.
	progress := func(p app.JobProgress) {
		p.Percent = min(p.Percent, 98)
		run.Progress(ctx, p)
	}
	var res *backupRun
	var w *blobstore.Writer
	switch o.Kind {
	case app.ObjectIMAP:
		acct, err := m.account(src)
		if err != nil {
			return nil, fmt.Errorf("opening the source's sealed password: %w", err)
		}
		if m.cfg.Engine.Backup == nil {
			return nil, m.backupFailed(ctx, o, src, errNoEngine)
		}
		if w, err = m.cfg.Blobs.NewWriter(ctx, o.TenantID); err != nil {
			return nil, m.backupFailed(ctx, o, src, err)
		}
		defer w.Close()
		r, err := m.cfg.Engine.Backup(ctx, acct, w, prev, progress)
		if err != nil {
			return nil, m.backupFailed(ctx, o, src, err)
		}
		res = &backupRun{items: r.Items, count: r.Messages, added: r.Added, removed: r.Removed}
		for _, f := range r.Failed {
			ref := f.ItemID
			if ref == "" {
				ref = fmt.Sprintf("%s/%d", f.Folder, f.UID)
			}
			res.failed = append(res.failed, itemFailure{ref, fmt.Sprintf("%s UID %d", f.Folder, f.UID), f.Err})
		}
	case app.ObjectMailbox, app.ObjectDrive:
		engine := m.cfg.M365.BackupMailbox
		if o.Kind == app.ObjectDrive {
			engine = m.cfg.M365.BackupDrive
		}
		if engine == nil {
			return nil, m.backupFailed(ctx, o, src, errors.New("the Microsoft 365 engine is not built into this binary"))
		}
		c, err := m.Client(src)
		if err != nil {
			return nil, m.backupFailed(ctx, o, src, err)
		}
		if w, err = m.cfg.Blobs.NewWriter(ctx, o.TenantID); err != nil {
			return nil, m.backupFailed(ctx, o, src, err)
		}
		defer w.Close()
		r, err := engine(ctx, c, o.ExternalID, w, prev, progress)
		if err != nil {
			return nil, m.backupFailed(ctx, o, src, err)
		}
		res = &backupRun{items: r.Items, count: r.Count, added: r.Added, removed: r.Removed}
		for _, f := range r.Failed {
			name := f.Ref
			if name == "" {
				name = f.ItemID
			}
			res.failed = append(res.failed, itemFailure{f.ItemID, name, f.Err})
		}
	default:
		return nil, fmt.Errorf("protected object %s has the unknown kind %q", o.ID, o.Kind)
	}
	run.Progress(ctx, app.JobProgress{Phase: "finishing", Percent: 99, ItemsDone: res.count, ItemsTotal: res.count})
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: o.ID, JobID: j.ID, AddedItems: res.added,
		RemovedItems: res.removed}, func(yield func(blobstore.Item) error) error {
		for _, it := range res.items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, m.backupFailed(ctx, o, src, err)
	}
	for _, f := range res.failed {
		if err := run.ItemFailed(ctx, f.ref, f.name, f.err); err != nil {
			return nil, err
		}
	}
	now := m.cfg.Now()
	state := app.JobSucceeded
	if len(res.failed) > 0 {
		state = app.JobPartial
	}
	if _, err := m.cfg.Objects.UpdateProtectedObject(ctx, o.ID, func(o *app.ProtectedObject) error {
		o.LastBackupAt, o.LastBackupState, o.LastSuccessAt = &now, state, &now
		o.LastSnapshotID, o.LastSnapshotAt = snap.ID, &snap.At.Time
		o.LastSnapshotItems, o.LastSnapshotBytes = res.count, snap.Bytes
		return nil
	}); err != nil {
		return nil, err
	}
	m.setSourceState(ctx, src.ID, app.SourceOK, "")
	m.log.Info("backup finished", "job_id", j.ID, "protected_object_id", o.ID, "kind", o.Kind, "snapshot_id", snap.ID,
		"items", res.count, "added", res.added, "removed", res.removed, "failed", len(res.failed))
	return &jobs.Outcome{SnapshotID: snap.ID, Progress: &app.JobProgress{Phase: "done", Percent: 100,
		ItemsDone: res.count, ItemsTotal: res.count, BytesDone: snap.Bytes, BytesTotal: snap.Bytes}}, nil
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

// backupFailed records a failed backup on the object and, for a cause of
// the source (IMAP, a refused Microsoft 365 sign-in or missing consent),
// on its source, and returns err for the runner. A run cut off by the
// runner closing records nothing: it is re-run, not failed.
func (m *Manager) backupFailed(ctx context.Context, o *app.ProtectedObject, src *app.Source, err error) error {
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
	m.sourceFailed(ctx, src, err)
	return err
}

// sourceFailed sets the source failing, with the reason, when err is the
// source's fault rather than one object's: any imap.* cause, and
// graph.auth_failed or graph.consent_missing (a refused sign-in is one too).
func (m *Manager) sourceFailed(ctx context.Context, src *app.Source, err error) {
	if ctx.Err() != nil {
		return
	}
	var fe *app.FailureError
	var ae *graph.AuthError
	switch {
	case errors.As(err, &ae):
		m.setSourceState(ctx, src.ID, app.SourceFailing, "Microsoft 365 sign-in failed: "+ae.Reason())
		return
	case errors.As(err, &fe) && (strings.HasPrefix(fe.Code, "imap.") || fe.Code == "graph.auth_failed" || fe.Code == "graph.consent_missing"):
	default:
		return
	}
	f := app.FailureFrom(err, "backup", m.cfg.Now())
	msg := f.Code
	if c, ok := app.LookupFailureCode(f.Code); ok {
		msg = c.Title
	}
	if first, _, _ := strings.Cut(f.Details, "\n"); first != "" {
		msg += ": " + first
	}
	if secret, oerr := m.cfg.Box.Open(src.ID, src.SealedSecret); oerr == nil && secret != "" {
		msg = strings.ReplaceAll(msg, secret, "[redacted]")
	}
	m.setSourceState(ctx, src.ID, app.SourceFailing, msg)
}

func (m *Manager) setSourceState(ctx context.Context, id, state, lastError string) {
	if _, err := m.cfg.Sources.UpdateSource(ctx, id, func(s *app.Source) error {
		s.State, s.LastError = state, lastError
		return nil
	}); err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		m.log.Error("recording the source's state failed", "source_id", id, "error", err)
	}
}

// backupQueue puts mailbox backups in mailbox_backup and drive backups in
// drive_backup (many workers each: the appliance-wide Graph budget bounds
// the requests); IMAP stays in imap_backup.
func (m *Manager) backupQueue(ctx context.Context, t app.JobTarget) string {
	o, err := m.cfg.Objects.ProtectedObject(ctx, t.ID)
	if err != nil {
		return ""
	}
	switch o.Kind {
	case app.ObjectMailbox:
		return app.QueueMailboxBackup
	case app.ObjectDrive:
		return app.QueueDriveBackup
	}
	return ""
}
