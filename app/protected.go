package app

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"
)

// Protected objects (CONTRACT §4, §12): one thing the appliance backs up
// itself into the blob store — an IMAP account, or a Microsoft 365 user's
// mailbox or drive.

// Protected object kinds and source kinds.
const (
	ObjectIMAP    = "imap"
	ObjectMailbox = "mailbox"
	ObjectDrive   = "drive"

	SourceIMAP = "imap"
	SourceM365 = "m365"

	// TargetProtectedObject is the job target type of protected-object
	// backups and verifies.
	TargetProtectedObject = "protected_object"

	AttentionSourceUnreachable = "source_unreachable"
)

// ProtectedObject is a protected object as stored: its identity and the
// facts that backups and verify runs record. Source facts (state, schedule)
// are read with it from its source. Derived fields (readiness, attention,
// overdue) are computed by View, never stored.
type ProtectedObject struct {
	ID               string
	TenantID         string
	Kind             string // imap, mailbox, drive
	SourceKind       string // imap, m365
	SourceID         string // "" once the source was deleted
	DirectoryEntryID string // the directory entry it belongs to, if any
	ExternalID       string // the object's id in its source (Graph user id, …); "" for IMAP
	DisplayName      string
	Address          string // e-mail address or account name
	Protected        bool   // scheduled backups run only while protected
	CreatedAt        time.Time

	LastBackupAt      *time.Time // end of the last backup, whatever its outcome
	LastBackupState   string     // succeeded, partial, failed
	LastSuccessAt     *time.Time // end of the last backup that produced a snapshot
	LastSnapshotID    string
	LastSnapshotAt    *time.Time
	LastSnapshotItems int64
	LastSnapshotBytes int64

	VerifyState            string // "", passed, failed
	VerifyCheckedAt        *time.Time
	VerifyPassedSnapshotID string
	RepositoryDamaged      bool
	// LastVerifyStartedAt is when the latest verify that checked packs
	// started: the next one checks the packs written since.
	LastVerifyStartedAt *time.Time

	// Read from the source (not columns of the object).
	SourceState    string // ok, failing, disabled; "" without a source
	SourceSchedule string // the source's cron schedule; "" means the default daily one
}

// VerifyFacts are the object's facts readiness is decided from.
func (o *ProtectedObject) VerifyFacts() VerifyFacts {
	return VerifyFacts{LastSnapshotID: o.LastSnapshotID, VerifyState: o.VerifyState, VerifyCheckedAt: o.VerifyCheckedAt,
		VerifyPassedSnapshotID: o.VerifyPassedSnapshotID, RepositoryDamaged: o.RepositoryDamaged}
}

// BackupSchedule is the cron schedule of the object's backups: its
// source's, or the default daily one.
func (o *ProtectedObject) BackupSchedule() string {
	if o.SourceSchedule != "" {
		return o.SourceSchedule
	}
	return DefaultObjectBackupSchedule(o.ID)
}

// Scheduled reports whether the object's backups run on a schedule: it is
// protected and its source exists and is not disabled.
func (o *ProtectedObject) Scheduled() bool {
	return o.Protected && o.SourceID != "" && o.SourceState != SourceDisabled
}

// DefaultObjectBackupSchedule is a protected object's daily backup when its
// source names no schedule: 02:MM UTC, the minute derived from the object
// id so an appliance's backups spread over the hour.
func DefaultObjectBackupSchedule(objectID string) string {
	return fmt.Sprintf("%d 2 * * *", spread(objectID))
}

// DefaultObjectVerifySchedule is a protected object's daily verify: 06:MM
// UTC, after the default backups.
func DefaultObjectVerifySchedule(objectID string) string {
	return fmt.Sprintf("%d 6 * * *", spread(objectID))
}

func spread(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32() % 60
}

// SnapshotSummary is a protected object's newest snapshot.
type SnapshotSummary struct {
	ID    string `json:"id"`
	At    Time   `json:"at"`
	Items int64  `json:"items" doc:"Items in the snapshot (for IMAP: messages across all folders)."`
	Bytes int64  `json:"bytes"`
}

// ProtectedObjectView is the protected object as the API shows it.
type ProtectedObjectView struct {
	ID            string           `json:"id"`
	TenantID      string           `json:"tenantId"`
	Kind          string           `json:"kind" enum:"mailbox,drive,imap"`
	Source        string           `json:"source" enum:"m365,imap"`
	SourceID      *string          `json:"sourceId" doc:"The source it is pulled from; null once the source was deleted (the snapshots stay until retention removes them)."`
	DisplayName   string           `json:"displayName"`
	Address       string           `json:"address"`
	Protected     bool             `json:"protected" doc:"Scheduled backups run only while protected; unprotecting keeps the snapshots."`
	LastSnapshot  *SnapshotSummary `json:"lastSnapshot"`
	LastBackupAt  *Time            `json:"lastBackupAt"`
	LastSuccessAt *Time            `json:"lastSuccessAt"`
	Readiness     Readiness        `json:"readiness"`
	Attention     *string          `json:"attention" enum:"repository_damaged,restore_test_failed,source_unreachable,last_backup_failed,backup_overdue"`
	CreatedAt     Time             `json:"createdAt"`
}

// View computes the API view of o at time now. This is the one place where
// a protected object's overdue, readiness and attention are decided:
//
//   - overdue: only for an object whose backups are scheduled (protected,
//     source present and enabled): no success within the schedule interval
//     plus half an interval, counted from the last success or creation.
//   - readiness: VerifyFacts.Readiness, the endpoint rule (green only after
//     a verify of the newest snapshot matched every sample).
//   - attention, first that applies: repository_damaged,
//     restore_test_failed (the latest verify failed), source_unreachable
//     (the source's last connection or sign-in failed), last_backup_failed,
//     backup_overdue. An object whose backups are not scheduled (unprotected,
//     source deleted or disabled) gets only the first two: its data still
//     matters, its backups are not expected.
func (o *ProtectedObject) View(now time.Time) ProtectedObjectView {
	v := ProtectedObjectView{ID: o.ID, TenantID: o.TenantID, Kind: o.Kind, Source: o.SourceKind, DisplayName: o.DisplayName,
		Address: o.Address, Protected: o.Protected, LastBackupAt: AtPtr(o.LastBackupAt), LastSuccessAt: AtPtr(o.LastSuccessAt),
		CreatedAt: At(o.CreatedAt)}
	if o.SourceID != "" {
		v.SourceID = Ptr(o.SourceID)
	}
	if o.LastSnapshotID != "" {
		s := &SnapshotSummary{ID: o.LastSnapshotID, Items: o.LastSnapshotItems, Bytes: o.LastSnapshotBytes}
		if o.LastSnapshotAt != nil {
			s.At = At(*o.LastSnapshotAt)
		}
		v.LastSnapshot = s
	}
	scheduled := o.Scheduled()
	late := scheduled && overdue(o.BackupSchedule(), o.CreatedAt, o.LastSuccessAt, now)
	v.Readiness = o.VerifyFacts().Readiness(late)

	var attention string
	switch {
	case o.RepositoryDamaged:
		attention = AttentionRepositoryDamaged
	case o.VerifyState == VerifyFailed:
		attention = AttentionRestoreTestFailed
	case !scheduled:
	case o.SourceState == SourceFailing:
		attention = AttentionSourceUnreachable
	case o.LastBackupState == JobFailed:
		attention = AttentionLastBackupFailed
	case late:
		attention = AttentionBackupOverdue
	}
	if attention != "" {
		v.Attention = &attention
	}
	return v
}

// ProtectedCounts is the status response's protectedObjects object.
type ProtectedCounts struct {
	Total            int `json:"total"`
	Mailboxes        int `json:"mailboxes"`
	Drives           int `json:"drives"`
	IMAP             int `json:"imap"`
	NeedingAttention int `json:"needingAttention"`
}

// CountProtectedObjects summarises views for the status response.
func CountProtectedObjects(views []ProtectedObjectView) ProtectedCounts {
	var c ProtectedCounts
	for i := range views {
		v := &views[i]
		c.Total++
		switch v.Kind {
		case ObjectMailbox:
			c.Mailboxes++
		case ObjectDrive:
			c.Drives++
		case ObjectIMAP:
			c.IMAP++
		}
		if v.Attention != nil {
			c.NeedingAttention++
		}
	}
	return c
}

// ProtectedObjectFilter selects protected objects in id order.
type ProtectedObjectFilter struct {
	TenantID string // "" for every tenant
	Kind     string
	SourceID string
	AfterID  string // cursor
	Limit    int    // 0: all
}

// ProtectedObjectService stores protected objects.
type ProtectedObjectService interface {
	// ProtectedObject returns one object with its source's facts, or a
	// not-found error.
	ProtectedObject(ctx context.Context, id string) (*ProtectedObject, error)
	ProtectedObjects(ctx context.Context, f ProtectedObjectFilter) ([]*ProtectedObject, error)
	// UpdateProtectedObject reads the object, applies fn and writes the
	// object's own columns back in one transaction.
	UpdateProtectedObject(ctx context.Context, id string, fn func(o *ProtectedObject) error) (*ProtectedObject, error)
}

// ProtectedObjectEvent is data.protectedObject of the webhook events of
// protected-object jobs (backups, verifies).
type ProtectedObjectEvent struct {
	ID          string  `json:"id"`
	Kind        string  `json:"kind"`
	Source      string  `json:"source"`
	SourceID    *string `json:"sourceId"`
	DisplayName string  `json:"displayName"`
	Address     string  `json:"address"`
}

// Event is the object as webhook events describe it.
func (o *ProtectedObject) Event() ProtectedObjectEvent {
	e := ProtectedObjectEvent{ID: o.ID, Kind: o.Kind, Source: o.SourceKind, DisplayName: o.DisplayName, Address: o.Address}
	if o.SourceID != "" {
		e.SourceID = Ptr(o.SourceID)
	}
	return e
}
