package app

import (
	"context"
	"time"
)

// The directory (CONTRACT §4, §13): every user, shared mailbox, room and
// IMAP account of a tenant, for billing and asset tracking in a PSA. IMAP
// accounts are entered when their source is created; the Microsoft 365
// directory sync fills the other kinds (keyed by source and external id).

// Directory entry kinds.
const (
	DirectoryUser          = "user"
	DirectorySharedMailbox = "shared_mailbox"
	DirectoryRoom          = "room"
	DirectoryIMAPAccount   = "imap_account"
)

// DirectoryEntry is one entry as stored. Protected is the administrator's
// choice (PUT /directory/{id}/protection): it is applied to the entry's
// protected objects, and the directory sync creates missing objects of a
// protected user.
type DirectoryEntry struct {
	ID                 string
	TenantID           string
	SourceID           string
	ExternalID         string // the entry's id in its source (Graph user id; the source id for IMAP)
	Kind               string
	DisplayName        string
	Email              string
	UserPrincipalName  string
	Enabled            bool
	Licensed           bool
	Licenses           []string
	Protected          bool
	ProtectedObjectIDs []string // read with the entry
	FirstSeenAt        time.Time
	LastSeenAt         time.Time
	// RemovedAt is when a directory sync last found the user gone from its
	// tenant; nil while present. A removed entry's objects keep their
	// snapshots but are no longer backed up (they are unprotected).
	RemovedAt *time.Time
}

// DirectoryEntryView is the entry as the API shows it.
type DirectoryEntryView struct {
	ID                 string   `json:"id"`
	TenantID           string   `json:"tenantId"`
	Kind               string   `json:"kind" enum:"user,shared_mailbox,room,imap_account"`
	DisplayName        string   `json:"displayName"`
	Email              string   `json:"email"`
	UserPrincipalName  string   `json:"userPrincipalName"`
	Enabled            bool     `json:"enabled"`
	Licensed           bool     `json:"licensed"`
	Licenses           []string `json:"licenses" doc:"SKU part numbers."`
	Protected          bool     `json:"protected"`
	ProtectedObjectIDs []string `json:"protectedObjectIds"`
	FirstSeenAt        Time     `json:"firstSeenAt"`
	LastSeenAt         Time     `json:"lastSeenAt"`
	RemovedAt          *Time    `json:"removedAt" doc:"When a directory sync found the user gone from the tenant; null while present. Its snapshots are kept, its backups stop."`
}

// View is the API view of the entry.
func (d *DirectoryEntry) View() DirectoryEntryView {
	v := DirectoryEntryView{ID: d.ID, TenantID: d.TenantID, Kind: d.Kind, DisplayName: d.DisplayName, Email: d.Email,
		UserPrincipalName: d.UserPrincipalName, Enabled: d.Enabled, Licensed: d.Licensed, Licenses: d.Licenses,
		Protected: d.Protected, ProtectedObjectIDs: d.ProtectedObjectIDs, FirstSeenAt: At(d.FirstSeenAt), LastSeenAt: At(d.LastSeenAt),
		RemovedAt: AtPtr(d.RemovedAt)}
	if v.Licenses == nil {
		v.Licenses = []string{}
	}
	if v.ProtectedObjectIDs == nil {
		v.ProtectedObjectIDs = []string{}
	}
	return v
}

// DirectoryFilter selects entries in id order.
type DirectoryFilter struct {
	TenantID string
	SourceID string
	Kind     string
	// Query matches display name, e-mail or user principal name
	// (case-insensitive substring).
	Query     string
	Protected *bool
	Licensed  *bool
	AfterID   string
	Limit     int
}

// DirectoryCounts are the billing counts of GET /directory/summary.
type DirectoryCounts struct {
	Users              int `json:"users"`
	SharedMailboxes    int `json:"sharedMailboxes"`
	Rooms              int `json:"rooms"`
	IMAPAccounts       int `json:"imapAccounts"`
	Licensed           int `json:"licensed"`
	Protected          int `json:"protected" doc:"Entries whose protection is on."`
	ProtectedMailboxes int `json:"protectedMailboxes" doc:"Protected objects of kind mailbox that are protected."`
	ProtectedDrives    int `json:"protectedDrives" doc:"Protected objects of kind drive that are protected."`
}

// Add adds o to c.
func (c *DirectoryCounts) Add(o DirectoryCounts) {
	c.Users += o.Users
	c.SharedMailboxes += o.SharedMailboxes
	c.Rooms += o.Rooms
	c.IMAPAccounts += o.IMAPAccounts
	c.Licensed += o.Licensed
	c.Protected += o.Protected
	c.ProtectedMailboxes += o.ProtectedMailboxes
	c.ProtectedDrives += o.ProtectedDrives
}

// TenantDirectoryCounts are one tenant's counts.
type TenantDirectoryCounts struct {
	TenantID string `json:"tenantId"`
	DirectoryCounts
}

// DailyDirectoryCounts is one tenant's counts as recorded for one day
// (00:00 UTC): what a PSA bills from.
type DailyDirectoryCounts struct {
	Date     string `json:"date" doc:"YYYY-MM-DD (UTC)."`
	TenantID string `json:"tenantId"`
	DirectoryCounts
}

// DirectorySync is the outcome of reading a Microsoft 365 source's
// directory, applied by SyncDirectory.
type DirectorySync struct {
	SourceID string
	At       time.Time
	// Entries are every user the tenant has now (ExternalID set); entries
	// of the source not among them are marked removed.
	Entries []*DirectoryEntry
	// AutoProtect protects entries seen for the first time when
	// ProtectEntry says they qualify.
	AutoProtect  bool
	ProtectEntry func(d *DirectoryEntry) bool
	// Objects returns the protected objects an entry of the source should
	// have (mailbox, drive); the store creates those missing.
	Objects func(d *DirectoryEntry) []*ProtectedObject
}

// DirectorySyncResult counts what a sync changed.
type DirectorySyncResult struct {
	Added, Updated, Removed, ObjectsCreated int
}

// DirectoryService stores the directory.
type DirectoryService interface {
	DirectoryEntry(ctx context.Context, id string) (*DirectoryEntry, error)
	DirectoryEntries(ctx context.Context, f DirectoryFilter) ([]*DirectoryEntry, error)
	// SetDirectoryProtection sets the entry's protection and that of every
	// protected object of the entry, in one transaction. Unprotecting keeps
	// the snapshots.
	SetDirectoryProtection(ctx context.Context, id string, protected bool) (*DirectoryEntry, error)
	// DirectoryCounts counts per tenant (tenantID "" for every tenant), in
	// tenant id order; tenants without entries or objects are left out.
	DirectoryCounts(ctx context.Context, tenantID string) ([]TenantDirectoryCounts, error)
	// SyncDirectory upserts a source's entries keyed by (source, external
	// id), marks the entries that are gone (removedAt, unprotected with
	// their objects, snapshots kept), protects new ones under autoProtect
	// and creates the missing objects of every protected entry, in one
	// transaction.
	SyncDirectory(ctx context.Context, s DirectorySync) (DirectorySyncResult, error)
	// ProtectDirectoryEntry sets the entry's protection like
	// SetDirectoryProtection and, when protecting, first creates the
	// objects that objects names and the entry lacks (by kind).
	ProtectDirectoryEntry(ctx context.Context, id string, protected bool, objects func(d *DirectoryEntry) []*ProtectedObject) (*DirectoryEntry, error)
	// RecordDailyCounts stores every tenant's current counts as date's row
	// (YYYY-MM-DD), replacing one recorded before for that day.
	RecordDailyCounts(ctx context.Context, date string) error
	// HasDailyCounts reports whether date's counts were recorded.
	HasDailyCounts(ctx context.Context, date string) (bool, error)
	// DailyCounts returns the recorded rows from..to (inclusive dates), by
	// date then tenant; tenantID "" for every tenant.
	DailyCounts(ctx context.Context, tenantID, from, to string) ([]DailyDirectoryCounts, error)
}

// DirectoryProtector protects and unprotects directory entries the way PUT
// /directory/{id}/protection does: protecting a Microsoft 365 entry
// creates its missing mailbox and drive objects (app/protect implements it).
type DirectoryProtector interface {
	SetProtection(ctx context.Context, id string, protected bool) (*DirectoryEntry, error)
}
