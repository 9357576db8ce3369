package app

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"
)

// Endpoint profiles, states and connection values (SPEC "Endpoint").
const (
	ProfileServer = "server"
	ProfileClient = "client"

	EndpointActive  = "active"
	EndpointRevoked = "revoked"

	ConnectionOnline  = "online"
	ConnectionOffline = "offline"
	ConnectionNever   = "never"

	ReadinessGreen      = "green"
	ReadinessYellow     = "yellow"
	ReadinessRed        = "red"
	ReadinessUnverified = "unverified"
	ReadinessNoBackup   = "no_backup"

	AttentionRepositoryDamaged = "repository_damaged"
	AttentionRestoreTestFailed = "restore_test_failed"
	AttentionLastBackupFailed  = "last_backup_failed"
	AttentionBackupOverdue     = "backup_overdue"
	AttentionSilent            = "silent"
	AttentionNeverSeen         = "never_seen"

	// OnlineWithin is SPEC's rule for connection = online.
	OnlineWithin = 15 * time.Minute
	// DefaultEndpointSchedule is the backup schedule of a new endpoint: daily.
	DefaultEndpointSchedule = "0 1 * * *"
)

// Endpoint is a server or client backed up by the agent, as stored: the facts
// reported by heartbeats, runs and verify runs. Derived fields (connection,
// readiness, attention) are computed by EndpointView, never stored.
type Endpoint struct {
	ID           string
	TenantID     string
	Hostname     string
	DisplayName  string
	Profile      string
	OS           string
	Arch         string
	AgentVersion string
	// PinnedAgentVersion, when set, keeps the endpoint's agent at that
	// version: self-update offers only it, or nothing. "" follows the
	// appliance's build.
	PinnedAgentVersion string
	Status             string
	CreatedAt          time.Time
	RevokedAt          *time.Time

	SecretFingerprint string // hex SHA-256 of the endpoint's secret

	Schedule string // cron expression of scheduled backups
	Paths    []string
	Excludes []string

	LastSeenAt      *time.Time
	LastBackupAt    *time.Time // end of the last run, whatever its outcome
	LastBackupState string     // job state of that run: succeeded, partial, failed
	LastSuccessAt   *time.Time // end of the last run that produced a snapshot
	LastSnapshotID  string     // newest snapshot

	// The latest restore test (verify run): its outcome and when it ran, and
	// the snapshot of the latest test that passed.
	VerifyState            string // "", "passed", "failed"
	VerifyCheckedAt        *time.Time
	VerifyPassedSnapshotID string
	RepositoryDamaged      bool
}

// Verify outcomes kept on an endpoint.
const (
	VerifyPassed = "passed"
	VerifyFailed = "failed"
)

// Readiness is whether the newest backup is proven to restore.
type Readiness struct {
	State     string `json:"state" enum:"green,yellow,red,unverified,no_backup"`
	CheckedAt *Time  `json:"checkedAt"`
	Overdue   bool   `json:"overdue"`
}

// EndpointView is the endpoint as the API shows it (SPEC "Endpoint").
type EndpointView struct {
	ID           string `json:"id"`
	TenantID     string `json:"tenantId"`
	Hostname     string `json:"hostname"`
	DisplayName  string `json:"displayName"`
	Profile      string `json:"profile" enum:"server,client"`
	OS           string `json:"os" enum:"linux,darwin,"`
	Arch         string `json:"arch" enum:"amd64,arm64,"`
	AgentVersion string `json:"agentVersion"`
	// PinnedAgentVersion is null when the agent follows the appliance's build.
	PinnedAgentVersion *string   `json:"pinnedAgentVersion" doc:"Agent version this endpoint is pinned to; null: it updates itself to the appliance's build."`
	Status             string    `json:"status" enum:"active,revoked"`
	Connection         string    `json:"connection" enum:"online,offline,never"`
	LastSeenAt         *Time     `json:"lastSeenAt"`
	LastBackupAt       *Time     `json:"lastBackupAt"`
	LastSuccessAt      *Time     `json:"lastSuccessAt"`
	Readiness          Readiness `json:"readiness"`
	Attention          *string   `json:"attention" enum:"silent,backup_overdue,last_backup_failed,restore_test_failed,repository_damaged,never_seen"`
	CreatedAt          Time      `json:"createdAt"`
}

// EndpointRules are the thresholds the derived fields depend on.
type EndpointRules struct {
	SilentAfterServer time.Duration // default 15m
	SilentAfterClient time.Duration // default 72h
}

// DefaultEndpointRules are CONTRACT §4's defaults.
func DefaultEndpointRules() EndpointRules {
	return EndpointRules{SilentAfterServer: 15 * time.Minute, SilentAfterClient: 72 * time.Hour}
}

// View computes the API view of e at time now. This is the one place where
// connection, readiness, overdue and attention are decided:
//
//   - connection: never (no contact yet), online (heard from within 15
//     minutes), else offline.
//   - overdue: no success within the schedule interval plus half an interval,
//     counted from the last success, or from creation when there is none.
//   - readiness, first that applies: no_backup (no snapshot yet); red (the
//     latest restore test failed, or the repository is damaged); unverified
//     (no restore test has passed yet); yellow (the last passing test is of an
//     older snapshot than the newest, or a backup is overdue); green.
//   - attention, first that applies: repository_damaged, restore_test_failed,
//     last_backup_failed, backup_overdue, silent (offline longer than the
//     profile's silent threshold), never_seen; null when none applies and
//     always null for a revoked endpoint.
func (e *Endpoint) View(now time.Time, rules EndpointRules) EndpointView {
	v := EndpointView{
		ID: e.ID, TenantID: e.TenantID, Hostname: e.Hostname, DisplayName: e.DisplayName,
		Profile: e.Profile, OS: e.OS, Arch: e.Arch, AgentVersion: e.AgentVersion, Status: e.Status,
		LastSeenAt: AtPtr(e.LastSeenAt), LastBackupAt: AtPtr(e.LastBackupAt), LastSuccessAt: AtPtr(e.LastSuccessAt),
		CreatedAt: At(e.CreatedAt),
	}
	if v.DisplayName == "" {
		v.DisplayName = e.Hostname
	}
	if e.PinnedAgentVersion != "" {
		pinned := e.PinnedAgentVersion
		v.PinnedAgentVersion = &pinned
	}

	switch {
	case e.LastSeenAt == nil:
		v.Connection = ConnectionNever
	case now.Sub(*e.LastSeenAt) <= OnlineWithin:
		v.Connection = ConnectionOnline
	default:
		v.Connection = ConnectionOffline
	}

	overdue := e.Overdue(now)
	v.Readiness = VerifyFacts{LastSnapshotID: e.LastSnapshotID, VerifyState: e.VerifyState, VerifyCheckedAt: e.VerifyCheckedAt,
		VerifyPassedSnapshotID: e.VerifyPassedSnapshotID, RepositoryDamaged: e.RepositoryDamaged}.Readiness(overdue)

	if e.Status == EndpointRevoked {
		return v
	}
	silentAfter := rules.SilentAfterServer
	if e.Profile == ProfileClient {
		silentAfter = rules.SilentAfterClient
	}
	var attention string
	switch {
	case e.RepositoryDamaged:
		attention = AttentionRepositoryDamaged
	case e.VerifyState == VerifyFailed:
		attention = AttentionRestoreTestFailed
	case e.LastBackupState == "failed":
		attention = AttentionLastBackupFailed
	case overdue:
		attention = AttentionBackupOverdue
	case e.LastSeenAt != nil && now.Sub(*e.LastSeenAt) > silentAfter:
		attention = AttentionSilent
	case e.LastSeenAt == nil:
		attention = AttentionNeverSeen
	}
	if attention != "" {
		v.Attention = &attention
	}
	return v
}

// Overdue reports whether no backup succeeded within the schedule interval
// plus a grace of half an interval.
func (e *Endpoint) Overdue(now time.Time) bool {
	return overdue(e.Schedule, e.CreatedAt, e.LastSuccessAt, now)
}

// overdue is the one rule for endpoints and protected objects: no success
// within the schedule interval plus half an interval, counted from the last
// success, or from creation when there is none. No schedule: never overdue.
func overdue(schedule string, created time.Time, lastSuccess *time.Time, now time.Time) bool {
	interval := ScheduleInterval(schedule, now)
	if interval <= 0 {
		return false // no schedule: only on-demand backups, never overdue
	}
	since := created
	if lastSuccess != nil {
		since = *lastSuccess
	}
	return now.Sub(since) > interval+interval/2
}

// VerifyFacts are the stored facts readiness is decided from, shared by
// endpoints and protected objects.
type VerifyFacts struct {
	LastSnapshotID         string // newest snapshot
	VerifyState            string // "", passed, failed: the latest verify
	VerifyCheckedAt        *time.Time
	VerifyPassedSnapshotID string // snapshot of the latest verify that passed
	RepositoryDamaged      bool
}

// Readiness decides readiness, first that applies: no_backup (no snapshot
// yet); red (the latest verify failed, or the repository is damaged);
// unverified (no verify has passed yet); yellow (the last passing verify is
// of an older snapshot than the newest, or a backup is overdue); green.
func (f VerifyFacts) Readiness(overdue bool) Readiness {
	r := Readiness{CheckedAt: AtPtr(f.VerifyCheckedAt), Overdue: overdue}
	switch {
	case f.LastSnapshotID == "":
		r.State = ReadinessNoBackup
	case f.VerifyState == VerifyFailed || f.RepositoryDamaged:
		r.State = ReadinessRed
	case f.VerifyPassedSnapshotID == "":
		r.State = ReadinessUnverified
	case f.VerifyPassedSnapshotID != f.LastSnapshotID || overdue:
		r.State = ReadinessYellow
	default:
		r.State = ReadinessGreen
	}
	return r
}

// ScheduleInterval returns the time between two consecutive runs of a cron
// schedule around now, or 0 for an empty or invalid schedule.
func ScheduleInterval(schedule string, now time.Time) time.Duration {
	if schedule == "" {
		return 0
	}
	return cachedScheduleInterval(schedule, now)
}

// ValidateSchedule checks a cron expression (five fields or a descriptor
// such as @daily); the empty string means on demand only.
func ValidateSchedule(schedule string) error {
	if schedule == "" {
		return nil
	}
	if _, err := cron.ParseStandard(schedule); err != nil {
		return FieldError("schedule", "schedule is not a valid cron expression: %v", err)
	}
	return nil
}

// EndpointFilter selects endpoints.
type EndpointFilter struct {
	TenantID string // "" for every tenant
	Profile  string // "" for both
}

// EndpointCounts is the `endpoints` object of the status response.
type EndpointCounts struct {
	Total            int   `json:"total"`
	Servers          int   `json:"servers"`
	Clients          int   `json:"clients"`
	Revoked          int   `json:"revoked"`
	NeedingAttention int   `json:"needingAttention"`
	LastSuccessAt    *Time `json:"lastSuccessAt"`
}

// CountEndpoints summarises views for the status response.
func CountEndpoints(views []EndpointView) EndpointCounts {
	var c EndpointCounts
	for i := range views {
		v := &views[i]
		c.Total++
		switch v.Profile {
		case ProfileServer:
			c.Servers++
		case ProfileClient:
			c.Clients++
		}
		if v.Status == EndpointRevoked {
			c.Revoked++
		}
		if v.Attention != nil {
			c.NeedingAttention++
		}
		if v.LastSuccessAt != nil && (c.LastSuccessAt == nil || v.LastSuccessAt.After(c.LastSuccessAt.Time)) {
			c.LastSuccessAt = v.LastSuccessAt
		}
	}
	return c
}

// EndpointService stores endpoints.
type EndpointService interface {
	CreateEndpoint(ctx context.Context, e *Endpoint) error
	Endpoint(ctx context.Context, id string) (*Endpoint, error)
	Endpoints(ctx context.Context, f EndpointFilter) ([]*Endpoint, error)
	UpdateEndpoint(ctx context.Context, id string, fn func(e *Endpoint) error) (*Endpoint, error)
}
