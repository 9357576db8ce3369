package protect

import (
	"context"
	"encoding/json"
	"fmt"

	"backstop/app"
	"backstop/app/jobs"
)

// The Microsoft 365 directory: directory_sync jobs read every user of a
// source's tenant (m365.SyncDirectory) and apply them to the directory.
//
// Which users get protected objects: users and shared mailboxes that have
// a mailbox get a mailbox and a drive object; a user or shared mailbox
// without one (no Exchange licence) gets the drive object only. Rooms and
// equipment mailboxes are listed and counted but never auto-protected
// (they hold calendars, not mail worth a backup); protecting one by hand
// gives it a mailbox object.

// SyncKind is the job kind of directory syncs of a Microsoft 365 source
// (action sync, target type source, queue directory_sync): at creation,
// hourly from serve's cron, and POST /sources/{id}/sync. A run upserts the
// tenant's users into the directory keyed by (source, Graph user id),
// marks the users that are gone (removedAt; their objects are unprotected,
// their snapshots kept), protects new users under autoProtect and creates
// the missing mailbox and drive objects of every protected user; the
// schedules follow.
func (m *Manager) SyncKind() jobs.Kind {
	return jobs.Kind{
		Action: app.ActionSync, TargetType: app.TargetSource, Queue: app.QueueDirectorySync,
		Resolve: func(ctx context.Context, tenantID, id string, _ json.RawMessage) (app.JobTarget, error) {
			src, err := m.cfg.Sources.Source(ctx, id)
			if err != nil {
				return app.JobTarget{}, err
			}
			if tenantID != "" && src.TenantID != tenantID {
				return app.JobTarget{}, app.NotFound("source")
			}
			if src.Kind != app.SourceM365 {
				return app.JobTarget{}, app.FieldError("path.id", "only Microsoft 365 sources have a directory to sync")
			}
			if src.Disabled {
				return app.JobTarget{}, app.FieldError("path.id", "the source is disabled: enable it first")
			}
			return app.JobTarget{Type: app.TargetSource, ID: src.ID, DisplayName: src.DisplayName}, nil
		},
		Run: m.runSync,
	}
}

// SubmitSync queues a directory sync of src, or returns the one already
// queued or running.
func (m *Manager) SubmitSync(ctx context.Context, src *app.Source, trigger string) (*app.Job, error) {
	if m.cfg.Jobs == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "Directory syncs are not available in this build.")
	}
	return m.cfg.Jobs.Submit(ctx, app.JobRequest{TenantID: src.TenantID, Action: app.ActionSync, TargetType: app.TargetSource,
		TargetID: src.ID, Trigger: trigger})
}

func (m *Manager) runSync(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
	src, err := m.cfg.Sources.Source(ctx, run.Job.Target.ID)
	if err != nil {
		return nil, err
	}
	if m.cfg.M365.SyncDirectory == nil || m.cfg.Directory == nil {
		return nil, fmt.Errorf("the Microsoft 365 engine is not built into this binary")
	}
	c, err := m.Client(src)
	if err != nil {
		return nil, err
	}
	run.Progress(ctx, app.JobProgress{Phase: "scanning"})
	users, err := m.cfg.M365.SyncDirectory(ctx, c, func(p app.JobProgress) {
		p.Percent = min(p.Percent, 90)
		run.Progress(ctx, p)
	})
	if err != nil {
		m.sourceFailed(ctx, src, err)
		return nil, err
	}
	now := m.cfg.Now()
	entries := make([]*app.DirectoryEntry, 0, len(users))
	mailbox := map[string]bool{}
	for _, u := range users {
		entries = append(entries, &app.DirectoryEntry{ExternalID: u.ExternalID, Kind: u.Kind, DisplayName: u.DisplayName,
			Email: u.Email, UserPrincipalName: u.UserPrincipalName, Enabled: u.Enabled, Licensed: u.Licensed, Licenses: u.Licenses})
		mailbox[u.ExternalID] = u.HasMailbox
	}
	res, err := m.cfg.Directory.SyncDirectory(ctx, app.DirectorySync{SourceID: src.ID, At: now, Entries: entries,
		AutoProtect: src.M365.AutoProtect,
		ProtectEntry: func(d *app.DirectoryEntry) bool {
			return d.Kind == app.DirectoryUser || d.Kind == app.DirectorySharedMailbox
		},
		Objects: func(d *app.DirectoryEntry) []*app.ProtectedObject {
			return m365Objects(d, mailbox[d.ExternalID])
		}})
	if err != nil {
		return nil, err
	}
	m.setSourceState(ctx, src.ID, app.SourceOK, "")
	m.log.Info("directory synced", "job_id", run.Job.ID, "source_id", src.ID, "users", len(users), "added", res.Added,
		"updated", res.Updated, "removed", res.Removed, "objects_created", res.ObjectsCreated)
	m.changed()
	n := int64(len(users))
	return &jobs.Outcome{Progress: &app.JobProgress{Phase: "done", Percent: 100, ItemsDone: n, ItemsTotal: n},
		EventData: map[string]any{"directory": map[string]any{"users": len(users), "added": res.Added, "updated": res.Updated,
			"removed": res.Removed, "objectsCreated": res.ObjectsCreated}}}, nil
}

// m365Objects are the protected objects a Microsoft 365 entry should have:
// a mailbox when it has one (rooms always: they have nothing else), and a
// drive for users and shared mailboxes.
func m365Objects(d *app.DirectoryEntry, hasMailbox bool) []*app.ProtectedObject {
	address := d.Email
	if address == "" {
		address = d.UserPrincipalName
	}
	mk := func(kind string) *app.ProtectedObject {
		return &app.ProtectedObject{Kind: kind, SourceKind: app.SourceM365, ExternalID: d.ExternalID, DisplayName: d.DisplayName,
			Address: address}
	}
	var out []*app.ProtectedObject
	if hasMailbox || d.Kind == app.DirectoryRoom || d.Kind == app.DirectorySharedMailbox {
		out = append(out, mk(app.ObjectMailbox))
	}
	if d.Kind == app.DirectoryUser || d.Kind == app.DirectorySharedMailbox {
		out = append(out, mk(app.ObjectDrive))
	}
	return out
}

// SetProtection protects or unprotects a directory entry (PUT
// /directory/{id}/protection). Protecting a Microsoft 365 entry creates
// its missing mailbox and drive objects first; IMAP entries only switch
// their one object. Schedules follow.
func (m *Manager) SetProtection(ctx context.Context, id string, protected bool) (*app.DirectoryEntry, error) {
	if m.cfg.Directory == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "The directory is not available in this build.")
	}
	d, err := m.cfg.Directory.DirectoryEntry(ctx, id)
	if err != nil {
		return nil, err
	}
	var objects func(d *app.DirectoryEntry) []*app.ProtectedObject
	if d.Kind != app.DirectoryIMAPAccount {
		// Whether the user has a mailbox is not stored: a user's mailbox
		// object is created, and a backup of a user without one fails with
		// graph.mailbox_unavailable, which says why.
		objects = func(d *app.DirectoryEntry) []*app.ProtectedObject { return m365Objects(d, true) }
	}
	out, err := m.cfg.Directory.ProtectDirectoryEntry(ctx, id, protected, objects)
	if err != nil {
		return nil, err
	}
	m.changed()
	return out, nil
}
