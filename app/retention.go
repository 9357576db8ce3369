package app

import "context"

// TargetTenant is the job target type of work on a whole tenant (retention).
const TargetTenant = "tenant"

// RetentionPolicy says which snapshots to keep (CONTRACT §11), by age in
// days counted back from now, in UTC: every snapshot younger than
// KeepAllDays; then the newest snapshot of each UTC day younger than
// KeepDailyDays, of each ISO week younger than KeepWeeklyDays and of each
// month younger than KeepMonthlyDays. Older snapshots are forgotten; the
// newest snapshot is never forgotten. A tier of 0 is skipped. The rules
// live in app/retention (Select, Validate, Default).
type RetentionPolicy struct {
	KeepAllDays     int `json:"keepAllDays" minimum:"0" maximum:"36500" doc:"Keep every snapshot younger than this many days; 0 skips the tier."`
	KeepDailyDays   int `json:"keepDailyDays" minimum:"0" maximum:"36500" doc:"Then keep the newest snapshot of each UTC day younger than this many days; 0 skips the tier."`
	KeepWeeklyDays  int `json:"keepWeeklyDays" minimum:"0" maximum:"36500" doc:"Then the newest of each ISO week younger than this many days; 0 skips the tier."`
	KeepMonthlyDays int `json:"keepMonthlyDays" minimum:"0" maximum:"36500" doc:"Then the newest of each calendar month (UTC) younger than this many days; 0 skips the tier."`
}

// RetentionService stores retention policies: one per tenant (absent: the
// default applies) and an optional override per endpoint (absent: the
// endpoint inherits its tenant's policy).
type RetentionService interface {
	// TenantRetention returns the tenant's stored policy; set is false (and
	// p zero) when the tenant never saved one. It does not check that the
	// tenant exists.
	TenantRetention(ctx context.Context, tenantID string) (p RetentionPolicy, set bool, err error)
	// SetTenantRetention stores the tenant's policy. An unknown tenant is a
	// validation error (the reference does not exist).
	SetTenantRetention(ctx context.Context, tenantID string, p RetentionPolicy) error
	// EndpointRetention returns the endpoint's override; set is false when
	// it inherits its tenant's policy.
	EndpointRetention(ctx context.Context, endpointID string) (p RetentionPolicy, set bool, err error)
	// SetEndpointRetention stores the endpoint's override; nil removes it
	// (the endpoint inherits again).
	SetEndpointRetention(ctx context.Context, endpointID string, p *RetentionPolicy) error
	// RecordEndpointPrune stores what a retention run did to the
	// endpoint's repository, replacing the run before.
	RecordEndpointPrune(ctx context.Context, endpointID string, p EndpointPrune) error
	// LastEndpointPrune returns the latest one; nil when the repository
	// was never pruned.
	LastEndpointPrune(ctx context.Context, endpointID string) (*EndpointPrune, error)
}

// EndpointPrune is what the latest retention run did to an endpoint's
// repository. Sizes are of the repository directory on disk, measured just
// before and just after restic forget --prune.
type EndpointPrune struct {
	JobID            string `json:"jobId"`
	At               Time   `json:"at" doc:"When the prune ended."`
	BytesBefore      int64  `json:"bytesBefore" doc:"The repository's size before the prune; 0 when the run failed before measuring."`
	BytesAfter       int64  `json:"bytesAfter" doc:"Its size after the prune."`
	SnapshotsRemoved int    `json:"snapshotsRemoved"`
	SnapshotsKept    int    `json:"snapshotsKept"`
	Failed           bool   `json:"failed" doc:"True when the prune failed; the job says why."`
}
