package app

import (
	"context"
	"time"
)

// Sources (CONTRACT §12): an account the appliance pulls from — an IMAP
// account, or (later) a Microsoft 365 tenant.

// PrefixSource begins every source id.
const PrefixSource = "src_"

// Source states. ok and failing are stored (the last connection or sign-in
// worked, or not); disabled is the administrator's choice and wins.
const (
	SourceOK       = "ok"
	SourceFailing  = "failing"
	SourceDisabled = "disabled"
)

// IMAP security modes.
const (
	SecurityNone     = "none"
	SecurityStartTLS = "starttls"
	SecurityTLS      = "tls"
)

// Error codes of a source that failed its check at creation or change
// (422, the message says why): the sign-in was refused, the TLS handshake
// or certificate failed, the server could not be reached, or the check
// failed otherwise.
const (
	ESOURCEAUTH        = "source_auth_failed"
	ESOURCETLS         = "source_tls_failed"
	ESOURCEUNREACHABLE = "source_unreachable"
	ESOURCECHECK       = "source_check_failed"
)

// Source is a source as stored. The password (or client secret) is only
// ever held sealed, bound to the source id.
type Source struct {
	ID          string
	TenantID    string
	Kind        string // imap, m365
	DisplayName string
	Disabled    bool
	State       string // ok, failing (stored); the view says disabled when Disabled
	LastError   string // why the last connection failed; "" when ok
	CreatedAt   time.Time
	// Schedule is the cron expression (UTC) of the backups of the source's
	// protected objects; "" means daily (DefaultObjectBackupSchedule).
	Schedule string

	IMAP         IMAPSettings
	M365         M365Settings
	SealedSecret []byte
}

// TargetSource is the job target type of work on a whole source (the
// directory sync of a Microsoft 365 tenant).
const TargetSource = "source"

// M365Settings are a Microsoft 365 source's non-secret settings. The client
// secret is the source's sealed secret.
type M365Settings struct {
	AzureTenantID string `json:"azureTenantId"`
	ClientID      string `json:"clientId"`
	GraphURL      string `json:"graphUrl,omitempty"` // "" for the global cloud
	LoginURL      string `json:"loginUrl,omitempty"` // "" for the global cloud
	// AutoProtect protects users that appear at a directory sync (mailbox
	// and drive objects are created for them).
	AutoProtect bool `json:"autoProtect"`
	// ConsentURL is the admin-consent link shown to the administrator.
	ConsentURL string `json:"consentUrl,omitempty"`
}

// IMAPSettings are an IMAP source's non-secret settings.
type IMAPSettings struct {
	Host             string `json:"host"`
	Port             int    `json:"port"`
	Security         string `json:"security"`
	Username         string `json:"username"`
	TrustFingerprint string `json:"trustFingerprint,omitempty"`
}

// ViewState is the state the API shows.
func (s *Source) ViewState() string {
	if s.Disabled {
		return SourceDisabled
	}
	if s.State == "" {
		return SourceOK
	}
	return s.State
}

// SourceView is a source as the API shows it: never its secret.
type SourceView struct {
	ID          string  `json:"id"`
	TenantID    string  `json:"tenantId"`
	Kind        string  `json:"kind" enum:"imap,m365"`
	DisplayName string  `json:"displayName"`
	State       string  `json:"state" enum:"ok,failing,disabled"`
	LastError   *string `json:"lastError" doc:"Why the last connection or sign-in failed; null when it worked."`
	CreatedAt   Time    `json:"createdAt"`
	Schedule    string  `json:"schedule" doc:"Cron expression (UTC) of the backups; empty means daily at 02:MM UTC, the minute spread per object."`

	Host               string   `json:"host,omitempty" doc:"imap only (absent for m365)."`
	Port               int      `json:"port,omitempty" doc:"imap only (absent for m365)."`
	Security           string   `json:"security,omitempty" enum:"none,starttls,tls" doc:"imap only (absent for m365)."`
	Username           string   `json:"username,omitempty" doc:"imap only (absent for m365)."`
	TrustFingerprint   *string  `json:"trustFingerprint" doc:"SHA-256 (hex) of the server certificate trusted instead of verifying the chain (self-signed lab servers); null when the chain is verified."`
	ProtectedObjectIDs []string `json:"protectedObjectIds" doc:"The protected objects pulled from this source."`

	AzureTenantID *string `json:"azureTenantId" doc:"m365: the customer's Microsoft Entra tenant (GUID or domain); null for imap."`
	ClientID      *string `json:"clientId" doc:"m365: the app registration's client id; null for imap. The client secret is sealed and never shown."`
	GraphURL      *string `json:"graphUrl" doc:"m365: the Graph base URL; null for imap."`
	LoginURL      *string `json:"loginUrl" doc:"m365: the identity platform base URL; null for imap."`
	AutoProtect   *bool   `json:"autoProtect" doc:"m365: users that appear at a directory sync are protected; null for imap."`
	ConsentURL    *string `json:"consentUrl" doc:"m365: the admin-consent link for the customer's tenant; null for imap."`
}

// View is the API view of s; objects are its protected objects' ids.
func (s *Source) View(objects []string) SourceView {
	v := SourceView{ID: s.ID, TenantID: s.TenantID, Kind: s.Kind, DisplayName: s.DisplayName, State: s.ViewState(),
		CreatedAt: At(s.CreatedAt), Schedule: s.Schedule, Host: s.IMAP.Host, Port: s.IMAP.Port, Security: s.IMAP.Security,
		Username: s.IMAP.Username, ProtectedObjectIDs: objects}
	if s.Kind == SourceM365 {
		m := s.M365
		v.AzureTenantID, v.ClientID, v.GraphURL, v.LoginURL = Ptr(m.AzureTenantID), Ptr(m.ClientID), Ptr(m.GraphURL), Ptr(m.LoginURL)
		v.AutoProtect, v.ConsentURL = Ptr(m.AutoProtect), Ptr(m.ConsentURL)
	}
	if s.LastError != "" {
		v.LastError = Ptr(s.LastError)
	}
	if s.IMAP.TrustFingerprint != "" {
		v.TrustFingerprint = Ptr(s.IMAP.TrustFingerprint)
	}
	if v.ProtectedObjectIDs == nil {
		v.ProtectedObjectIDs = []string{}
	}
	return v
}

// SourceFilter selects sources in id order.
type SourceFilter struct {
	TenantID string // "" for every tenant
	AfterID  string
	Limit    int
}

// SourceStore stores sources.
type SourceStore interface {
	// CreateSource stores a source together with its protected objects and
	// directory entries, in one transaction.
	CreateSource(ctx context.Context, s *Source, objects []*ProtectedObject, entries []*DirectoryEntry) error
	Source(ctx context.Context, id string) (*Source, error)
	Sources(ctx context.Context, f SourceFilter) ([]*Source, error)
	// UpdateSource reads the source, applies fn and writes it back; a
	// changed display name is carried to its IMAP object and directory
	// entry in the same transaction.
	UpdateSource(ctx context.Context, id string, fn func(s *Source) error) (*Source, error)
	// DeleteSource removes the source and its directory entries; its
	// protected objects stay, unprotected and without a source, with their
	// snapshots, until retention removes them.
	DeleteSource(ctx context.Context, id string) error
}

// SourceSpec is a new source as POST /sources asks for it.
type SourceSpec struct {
	TenantID    string
	Kind        string
	DisplayName string
	Schedule    string
	IMAP        IMAPSettings
	Password    string // IMAP password
	// M365 settings; ClientSecret is sealed. AutoProtect nil means true.
	M365         M365Settings
	AutoProtect  *bool
	ClientSecret string
}

// SourceUpdate is a PATCH of a source; nil fields stay.
type SourceUpdate struct {
	DisplayName      *string
	Host             *string
	Port             *int
	Security         *string
	Password         *string
	TrustFingerprint *string // "" removes it
	Schedule         *string
	Disabled         *bool
	// m365 only.
	ClientSecret *string // checked with Graph before it is saved
	AutoProtect  *bool
}

// SourceService is what the API offers on sources (app/protect implements
// it): creation and changes of connection settings check the login first.
type SourceService interface {
	Sources(ctx context.Context, f SourceFilter) ([]*Source, error)
	Source(ctx context.Context, id string) (*Source, error)
	// Create checks the login and stores the source with its protected
	// object and directory entry; a failed check is one of the ESOURCE
	// codes with the reason, and nothing is stored.
	Create(ctx context.Context, spec SourceSpec) (*Source, error)
	// Update applies a PATCH; a change of host, port, security, password
	// or trusted fingerprint is checked before it is saved.
	Update(ctx context.Context, id string, u SourceUpdate) (*Source, error)
	Delete(ctx context.Context, id string) error
}
