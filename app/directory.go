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
}

// View is the API view of the entry.
func (d *DirectoryEntry) View() DirectoryEntryView {
	v := DirectoryEntryView{ID: d.ID, TenantID: d.TenantID, Kind: d.Kind, DisplayName: d.DisplayName, Email: d.Email,
		UserPrincipalName: d.UserPrincipalName, Enabled: d.Enabled, Licensed: d.Licensed, Licenses: d.Licenses,
		Protected: d.Protected, ProtectedObjectIDs: d.ProtectedObjectIDs, FirstSeenAt: At(d.FirstSeenAt), LastSeenAt: At(d.LastSeenAt)}
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
	Kind     string
	AfterID  string
	Limit    int
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
}
