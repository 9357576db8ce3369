package protect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/imapbackup"
	"backstop/app/jobs"
	"backstop/app/m365"
)

// RestoreParams are the body of POST /restores for a snapshot of a
// protected object, kept with the job.
type RestoreParams struct {
	SnapshotID string `json:"snapshotId"`
	// Items are item ids or folder paths of the snapshot; every message
	// when empty. A folder path stands for its messages and its subfolders'.
	Items       []string            `json:"items,omitempty"`
	Destination *RestoreDestination `json:"destination,omitempty"`
}

// RestoreDestination says where restored messages go: another protected
// object of the same kind and tenant, and the folder under which the
// snapshot's folder structure is recreated.
type RestoreDestination struct {
	ProtectedObjectID string `json:"protectedObjectId,omitempty"`
	Folder            string `json:"folder,omitempty"`
}

// RestoreFolder is the default destination folder of a restore of a
// snapshot: named for the snapshot's time, not the restore's, so running
// the same restore again lands in the same folder and adds nothing there.
func RestoreFolder(snapshotAt time.Time) string {
	return "Restored " + snapshotAt.UTC().Format("2006-01-02 15:04") + " UTC"
}

// RestoreKind is the job kind of restores of protected-object snapshots
// (POST /restores with an sn_ snapshot id, queue restore). A restore puts
// the exact stored bytes back with their flags and dates, into a new
// folder, never overwriting and never duplicating: a message already in the
// destination folder is skipped, so a second run, or the rerun of an
// interrupted one, adds nothing. Transient failures are retried.
func (m *Manager) RestoreKind() jobs.Kind {
	return jobs.Kind{
		Action: app.ActionRestore, TargetType: app.TargetProtectedObject, Queue: app.QueueRestore,
		Resolve: func(ctx context.Context, tenantID, snapshotID string, params json.RawMessage) (app.JobTarget, error) {
			plan, err := m.planRestore(ctx, tenantID, snapshotID, params)
			if err != nil {
				return app.JobTarget{}, err
			}
			return app.JobTarget{Type: app.TargetProtectedObject, ID: plan.dest.ID, DisplayName: plan.dest.DisplayName}, nil
		},
		Run:       m.runRestore,
		EventData: m.eventData,
	}
}

// restorePlan is a checked restore: what, from where, to where.
type restorePlan struct {
	snap   *app.Snapshot
	dest   *app.ProtectedObject
	folder string
	items  []blobstore.Item
}

// planRestore checks a restore request: the snapshot is the tenant's (an
// unknown or endpoint snapshot is NotFound, so the endpoint kind may take
// it), the destination is a protected IMAP object of the same tenant with
// a source, and every selected item exists in the snapshot.
func (m *Manager) planRestore(ctx context.Context, tenantID, snapshotID string, raw json.RawMessage) (*restorePlan, error) {
	if !app.HasPrefix(snapshotID, app.PrefixSnapshot) {
		return nil, app.NotFound("snapshot")
	}
	snap, _, err := m.cfg.Catalog.Snapshot(ctx, snapshotID)
	if err != nil {
		return nil, err
	}
	if tenantID != "" && snap.TenantID != tenantID {
		return nil, app.NotFound("snapshot")
	}
	var p RestoreParams
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return nil, app.FieldError("body.destination", "destination must be { protectedObjectId?, folder? }: %v", err)
		}
	}
	plan := &restorePlan{snap: snap}
	destID := snap.ProtectedObjectID
	if p.Destination != nil {
		if p.Destination.ProtectedObjectID != "" {
			destID = p.Destination.ProtectedObjectID
		}
		plan.folder = p.Destination.Folder
	}
	src, err := m.cfg.Objects.ProtectedObject(ctx, snap.ProtectedObjectID)
	if err != nil {
		return nil, err
	}
	dest, err := m.object(ctx, snap.TenantID, destID)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return nil, app.FieldError("body.destination.protectedObjectId", "no protected object %s in this tenant", destID)
	} else if err != nil {
		return nil, err
	}
	switch {
	case dest.Kind != src.Kind:
		return nil, app.FieldError("body.destination.protectedObjectId", "a %s snapshot restores into a %s object, not a %s one", src.Kind, src.Kind, dest.Kind)
	case dest.Kind != app.ObjectIMAP && dest.Kind != app.ObjectMailbox && dest.Kind != app.ObjectDrive:
		return nil, app.FieldError("body.snapshotId", "%s snapshots cannot be restored in this version", dest.Kind)
	case dest.SourceKind != src.SourceKind:
		return nil, app.FieldError("body.destination.protectedObjectId", "a %s snapshot restores into an object of a %s source", src.SourceKind, src.SourceKind)
	case dest.SourceID == "":
		return nil, app.FieldError("body.destination.protectedObjectId", "the object's source was deleted: there is no account to restore into")
	case dest.SourceState == app.SourceDisabled:
		return nil, app.FieldError("body.destination.protectedObjectId", "the object's source is disabled: enable it first")
	}
	plan.dest = dest
	if plan.folder == "" {
		plan.folder = RestoreFolder(snap.At.Time)
		if dest.Kind == app.ObjectDrive {
			plan.folder = RestoreFilesFolder(snap.At.Time)
		}
	}
	check := checkFolderName
	if dest.Kind == app.ObjectDrive {
		check = checkDriveFolderName
	}
	if err := check(plan.folder); err != nil {
		return nil, app.FieldError("body.destination.folder", "%v", err)
	}
	if plan.items, err = m.selectItems(ctx, snapshotID, p.Items); err != nil {
		return nil, err
	}
	return plan, nil
}

// RestoreFilesFolder is the default top folder of a restore of drive
// files: like RestoreFolder with '-' for ':', which OneDrive does not allow
// in names.
func RestoreFilesFolder(snapshotAt time.Time) string {
	return "Restored " + snapshotAt.UTC().Format("2006-01-02 15-04") + " UTC"
}

// checkDriveFolderName checks a OneDrive folder path: no characters OneDrive
// refuses in names (" * : < > ? / \ | and control characters), no part
// ending in a dot or space or being a reserved name.
func checkDriveFolderName(f string) error {
	if !utf8.ValidString(f) || f == "" || len(f) > 200 {
		return errors.New("the folder name must be valid UTF-8, 1 to 200 bytes")
	}
	if strings.HasPrefix(f, "/") || strings.HasSuffix(f, "/") || strings.Contains(f, "//") {
		return errors.New("the folder path must not begin or end with / or hold an empty part")
	}
	for _, part := range strings.Split(f, "/") {
		if strings.ContainsAny(part, "\"*:<>?\\|") || strings.IndexFunc(part, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return fmt.Errorf("%q holds a character OneDrive does not allow in names (\" * : < > ? \\ | or control characters)", part)
		}
		if strings.HasSuffix(part, ".") || strings.HasSuffix(part, " ") || strings.HasPrefix(part, " ") {
			return fmt.Errorf("%q must not begin with a space or end with a dot or space", part)
		}
		switch strings.ToUpper(part) {
		case ".LOCK", "CON", "PRN", "AUX", "NUL", "COM1", "LPT1", "DESKTOP.INI", "_VTI_":
			return fmt.Errorf("%q is a name OneDrive reserves", part)
		}
	}
	return nil
}

func checkFolderName(f string) error {
	switch {
	case !utf8.ValidString(f) || strings.ContainsAny(f, "\x00\r\n*%"):
		return errors.New("the folder name holds a character IMAP does not allow in names (*, %, control characters)")
	case strings.HasPrefix(f, "/") || strings.HasSuffix(f, "/") || strings.Contains(f, "//"):
		return errors.New("the folder path must not begin or end with / or hold an empty part")
	case len(f) > 200:
		return errors.New("the folder name is longer than 200 bytes")
	}
	return nil
}

// selectItems returns the snapshot's items the selectors name: item ids,
// or folder paths (a folder and everything below it). No selector: every
// item. A selector that matches nothing is a validation error naming it.
func (m *Manager) selectItems(ctx context.Context, snapshotID string, selectors []string) ([]blobstore.Item, error) {
	matched := make([]bool, len(selectors))
	var out []blobstore.Item
	err := m.cfg.Blobs.Items(ctx, snapshotID, func(it blobstore.Item) error {
		keep := len(selectors) == 0
		for i, s := range selectors {
			if it.ID == s || it.Path == s || strings.HasPrefix(it.Path, strings.TrimSuffix(s, "/")+"/") {
				keep, matched[i] = true, true
			}
		}
		if keep {
			out = append(out, it)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, ok := range matched {
		if !ok {
			return nil, app.FieldError(fmt.Sprintf("body.items[%d]", i), "%q is neither an item id nor a folder of the snapshot", selectors[i])
		}
	}
	return out, nil
}

func (m *Manager) runRestore(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
	j := run.Job
	var p RestoreParams
	if err := json.Unmarshal(j.Params, &p); err != nil {
		return nil, fmt.Errorf("restore parameters: %w", err)
	}
	plan, err := m.planRestore(ctx, j.TenantID, p.SnapshotID, j.Params)
	if err != nil {
		return nil, err
	}
	src, err := m.cfg.Sources.Source(ctx, plan.dest.SourceID)
	if err != nil {
		return nil, err
	}
	run.Progress(ctx, app.JobProgress{Phase: "starting"})
	open := func(ctx context.Context, c blobstore.Content) (io.ReadCloser, error) {
		return m.cfg.Blobs.Open(ctx, plan.snap.TenantID, c)
	}
	progress := func(p app.JobProgress) { run.Progress(ctx, p) }
	var restored, skipped int64
	var failed []itemFailure
	switch plan.dest.Kind {
	case app.ObjectMailbox, app.ObjectDrive:
		engine := m.cfg.M365.RestoreMail
		if plan.dest.Kind == app.ObjectDrive {
			engine = m.cfg.M365.RestoreFiles
		}
		if engine == nil {
			return nil, errors.New("the Microsoft 365 engine is not built into this binary")
		}
		c, err := m.Client(src)
		if err != nil {
			return nil, err
		}
		res, err := engine(ctx, c, m365.RestoreRequest{UserID: plan.dest.ExternalID, Items: plan.items, Folder: plan.folder},
			m365.Opener(open), progress)
		if err != nil {
			m.sourceFailed(ctx, src, err)
			return nil, err
		}
		restored, skipped = res.Restored, res.Skipped
		for _, f := range res.Failed {
			name := f.Ref
			if name == "" {
				name = f.ItemID
			}
			failed = append(failed, itemFailure{f.ItemID, name, f.Err})
		}
	default:
		acct, err := m.account(src)
		if err != nil {
			return nil, fmt.Errorf("opening the source's sealed password: %w", err)
		}
		if m.cfg.Engine.Restore == nil {
			return nil, errNoEngine
		}
		res, err := m.cfg.Engine.Restore(ctx, acct, imapbackup.RestoreRequest{Items: plan.items, Folder: plan.folder}, open, progress)
		if err != nil {
			return nil, err
		}
		restored, skipped = res.Restored, res.Skipped
		for _, f := range res.Failed {
			ref := f.ItemID
			if ref == "" {
				ref = fmt.Sprintf("%s/%d", f.Folder, f.UID)
			}
			failed = append(failed, itemFailure{ref, fmt.Sprintf("%s UID %d", f.Folder, f.UID), f.Err})
		}
	}
	for _, f := range failed {
		if err := run.ItemFailed(ctx, f.ref, f.name, f.err); err != nil {
			return nil, err
		}
	}
	res := struct{ Restored, Skipped int64 }{restored, skipped}
	resFailed := failed
	done := res.Restored + res.Skipped
	m.log.Info("restore finished", "job_id", j.ID, "snapshot_id", plan.snap.ID, "protected_object_id", plan.dest.ID,
		"folder", plan.folder, "restored", res.Restored, "skipped", res.Skipped, "failed", len(resFailed))
	return &jobs.Outcome{SnapshotID: plan.snap.ID, Progress: &app.JobProgress{Phase: "done", Percent: 100,
		ItemsDone: done, ItemsTotal: done + int64(len(resFailed))},
		EventData: map[string]any{"restore": map[string]any{"folder": plan.folder, "restored": res.Restored, "skipped": res.Skipped}}}, nil
}
