package app

import (
	"context"
	"time"
)

// ESTORAGEUNUSABLE is the code of a storage target that failed its check
// (write, read, conditional create, delete of a probe object) when it was
// created or its credentials changed (CONTRACT §11); answered 422.
const ESTORAGEUNUSABLE = "storage_target_unusable"

// Storage target kinds.
const (
	StorageKindLocal = "local"
	StorageKindS3    = "s3"
)

// Storage target states, from best to worst (see WorseStorageState).
const (
	StorageOK          = "ok"
	StorageDegraded    = "degraded"
	StorageFull        = "full"
	StorageUnreachable = "unreachable"
)

// DefaultMinFreeBytes is storage.min_free_bytes when not configured: a
// target with less free space than this is full.
const DefaultMinFreeBytes = 1 << 30

// storageStateRank orders states: unreachable > full > degraded > ok.
var storageStateRank = map[string]int{StorageOK: 0, StorageDegraded: 1, StorageFull: 2, StorageUnreachable: 3}

// WorseStorageState returns the worse of two states; "" counts as ok.
func WorseStorageState(a, b string) string {
	if storageStateRank[b] > storageStateRank[a] || a == "" {
		return b
	}
	return a
}

// StorageTarget is where the blob store keeps data (CONTRACT §11): a local
// directory or an S3-compatible bucket. The secret of an S3 target is never
// part of it in the clear: storage holds it sealed (SealedSecret) and the
// API never shows it.
type StorageTarget struct {
	ID            string   `json:"id" doc:"st_…"`
	Name          string   `json:"name"`
	Kind          string   `json:"kind" enum:"local,s3"`
	State         string   `json:"state" enum:"ok,degraded,full,unreachable" doc:"ok; degraded: reachable but a write or read check failed; full: free space under storage.min_free_bytes or the provider answered insufficient storage; unreachable: the last check could not connect."`
	CapacityBytes *int64   `json:"capacityBytes" doc:"Size of the target; null where it cannot say (S3)."`
	UsedBytes     *int64   `json:"usedBytes" doc:"Bytes in use on the target (by anything); null where it cannot say (S3)."`
	FreeBytes     *int64   `json:"freeBytes" doc:"Bytes free; null where the target cannot say (S3)."`
	StoredBytes   int64    `json:"storedBytes" doc:"What Backstop keeps there (pack files of the blob store); for a tenant key, that tenant's share."`
	CheckedAt     *Time    `json:"checkedAt" nullable:"true" doc:"When the state was last checked; null before the first check."`
	LastError     *string  `json:"lastError" doc:"Why the last check did not find the target ok; null when it did."`
	Default       bool     `json:"default" doc:"The target of every tenant not placed elsewhere; exactly one target is the default."`
	TenantIDs     []string `json:"tenantIds" doc:"Tenants placed on this target; empty on the default target means every tenant not placed elsewhere."`

	// Settings shown on the wire; which are set depends on the kind.
	Path        string `json:"path,omitempty" doc:"local: the directory."`
	Endpoint    string `json:"endpoint,omitempty" doc:"s3: host[:port] of the S3 API."`
	Region      string `json:"region,omitempty" doc:"s3: region, if the provider needs one."`
	Bucket      string `json:"bucket,omitempty" doc:"s3: bucket."`
	Prefix      string `json:"prefix,omitempty" doc:"s3: key prefix inside the bucket."`
	AccessKeyID string `json:"accessKeyId,omitempty" doc:"s3: access key id (the secret key is never shown)."`
	PathStyle   *bool  `json:"pathStyle,omitempty" doc:"s3: path-style addressing (bucket in the path, not the host name)."`
	TLS         *bool  `json:"tls,omitempty" doc:"s3: connect with HTTPS."`

	CreatedAt Time `json:"createdAt"`
	UpdatedAt Time `json:"updatedAt"`

	// SealedSecret is the S3 secret access key, encrypted at rest and bound
	// to the target's id; nil for local targets.
	SealedSecret []byte `json:"-"`
	// Filesystem identifies the file system of a local target, so totals
	// count the space of targets on one file system once; "" if unknown.
	Filesystem string `json:"-"`
}

// S3Settings are what opens an S3-compatible target, secret included. They
// exist only in memory, between the API (or the sealed row) and the backend.
type S3Settings struct {
	Endpoint        string // host[:port]
	Region          string
	Bucket          string
	Prefix          string // key prefix, no leading or trailing slash
	AccessKeyID     string
	SecretAccessKey string
	PathStyle       bool
	TLS             bool
}

// S3Settings returns the target's S3 settings with the given (opened)
// secret.
func (t *StorageTarget) S3Settings(secret string) S3Settings {
	s := S3Settings{Endpoint: t.Endpoint, Region: t.Region, Bucket: t.Bucket, Prefix: t.Prefix,
		AccessKeyID: t.AccessKeyID, SecretAccessKey: secret}
	if t.PathStyle != nil {
		s.PathStyle = *t.PathStyle
	}
	if t.TLS != nil {
		s.TLS = *t.TLS
	}
	return s
}

// StorageTargetState is the outcome of one check of a target.
type StorageTargetState struct {
	State         string
	CapacityBytes *int64
	UsedBytes     *int64
	FreeBytes     *int64
	CheckedAt     time.Time
	LastError     *string
}

// StorageTargetFilter selects targets in creation (id) order.
type StorageTargetFilter struct {
	AfterID string // cursor: targets with a greater id
	Limit   int    // 0: no limit
	// ForTenant, when set, selects only the targets that serve the tenant
	// (its placement, else the default) and counts storedBytes for that
	// tenant alone; "" selects every target with storedBytes of all tenants.
	ForTenant string
}

// StorageTargetSpec is a target to create, as an administrator typed it.
type StorageTargetSpec struct {
	Name      string
	Kind      string
	Path      string // local
	S3        S3Settings
	Default   bool
	TenantIDs []string
}

// StorageTargetUpdate holds what a PATCH may change; nil leaves a field.
// The kind, path, endpoint and bucket of a target are fixed: the data is
// there.
type StorageTargetUpdate struct {
	Name      *string
	Default   *bool // only true: the default moves; it cannot be unset
	TenantIDs *[]string
	// New S3 credentials; the target is checked with them before they are
	// saved.
	AccessKeyID     *string
	SecretAccessKey *string
}

// StorageTargetStore stores targets, their tenant placement and their last
// checked state. Implemented by store.DB.
type StorageTargetStore interface {
	// CreateStorageTarget stores t with its placement. If t.Default, the
	// previous default target loses the flag in the same transaction.
	// Tenants in t.TenantIDs move to t from any other target.
	CreateStorageTarget(ctx context.Context, t *StorageTarget) error
	// StorageTarget returns the target with storedBytes of all tenants, or
	// a not-found error.
	StorageTarget(ctx context.Context, id string) (*StorageTarget, error)
	StorageTargets(ctx context.Context, f StorageTargetFilter) ([]*StorageTarget, error)
	// UpdateStorageTarget reads the target, applies fn and writes it back
	// (name, default, placement, S3 credentials) in one transaction, with
	// the rules of CreateStorageTarget. State columns are left alone.
	UpdateStorageTarget(ctx context.Context, id string, fn func(t *StorageTarget) error) (*StorageTarget, error)
	// SaveStorageTargetState records a check's outcome.
	SaveStorageTargetState(ctx context.Context, id string, s StorageTargetState) error
	// TenantStorageTarget returns the id of the target new data of the
	// tenant goes to: its placement, else the default target.
	TenantStorageTarget(ctx context.Context, tenantID string) (string, error)
}

// StorageTargetService is what the API offers on storage targets.
// Implemented by app/targets.Manager.
type StorageTargetService interface {
	// Targets lists targets as the store does.
	Targets(ctx context.Context, f StorageTargetFilter) ([]*StorageTarget, error)
	// Create checks the target and stores it; a target that fails the
	// check is ESTORAGEUNUSABLE with the reason.
	Create(ctx context.Context, spec StorageTargetSpec) (*StorageTarget, error)
	// Update applies a PATCH; new credentials are checked before they are
	// saved.
	Update(ctx context.Context, id string, u StorageTargetUpdate) (*StorageTarget, error)
	// Usable returns nil when the default target's state is ok, else why not.
	Usable(ctx context.Context) error
}

// ApplianceKeyDownload records the one download of the appliance key file.
type ApplianceKeyDownload struct {
	At        time.Time
	UserID    string
	UserEmail string
}

// ApplianceKeyDownloads records that the appliance key was downloaded.
type ApplianceKeyDownloads interface {
	// RecordApplianceKeyDownload durably records d if no download was
	// recorded before and returns nil; otherwise it records nothing and
	// returns the earlier download.
	RecordApplianceKeyDownload(ctx context.Context, d ApplianceKeyDownload) (earlier *ApplianceKeyDownload, err error)
}
