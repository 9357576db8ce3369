package app

import (
	"context"
	"time"
)

// Settings are the operator's choices changed at run time through the web
// interface; the YAML file holds those fixed at start-up.
type Settings struct {
	UpdateCheck   bool   `json:"updateCheck" doc:"Whether the daily update check runs. Off on a fresh installation."`
	UpdateChannel string `json:"updateChannel" enum:"stable,beta" doc:"Release channel the update check follows."`
	// UpdateCheckEnabledAt is when the check was last turned on; a check
	// older than that is not current and the state is pending.
	UpdateCheckEnabledAt *time.Time `json:"-"`
}

// SettingsService stores settings.
type SettingsService interface {
	Settings(ctx context.Context) (*Settings, error)
	UpdateSettings(ctx context.Context, fn func(s *Settings) error) (*Settings, error)
}

// Update check states (SPEC "Version object").
const (
	UpdateCheckDisabled = "disabled"
	UpdateCheckPending  = "pending"
	UpdateCheckOK       = "ok"
	UpdateCheckFailed   = "failed"
)

// VersionCheck is the cached result of the last update check.
type VersionCheck struct {
	Channel     string
	CheckedAt   time.Time
	LatestTag   string
	Latest      string // semantic version without the leading v
	ReleaseURL  string
	PublishedAt *time.Time
	CheckError  string // "" on success; rate_limited, not_found, network, bad_response
}

// Maintenance phases (CONTRACT §15), in the order an update goes through
// them; failed ends an update that did not complete (the error says why,
// including a rollback to the previous binary).
const (
	MaintenanceAnnounced   = "announced"
	MaintenanceDownloading = "downloading"
	MaintenanceVerifying   = "verifying"
	MaintenanceApplying    = "applying"
	MaintenanceRestarting  = "restarting"
	MaintenanceFailed      = "failed"
)

// Maintenance is an announced or running update through the updater.
type Maintenance struct {
	Phase         string  `json:"phase" enum:"announced,downloading,verifying,applying,restarting,failed"`
	TargetVersion string  `json:"targetVersion" doc:"Semantic version without the leading v."`
	StartsAt      *Time   `json:"startsAt" doc:"When the update starts; null: at once."`
	Error         *string `json:"error" doc:"Why the update failed; null unless phase is failed."`
	// FromVersion is the version that announced the update; a process of
	// another version finding phase restarting is the new one.
	FromVersion string `json:"-"`
}

// MaintenanceService stores the one maintenance record; it survives a
// restart, which is how the new binary learns an update brought it.
type MaintenanceService interface {
	// Maintenance returns the record, or a not-found error when none.
	Maintenance(ctx context.Context) (*Maintenance, error)
	// UpdateMaintenance applies fn to the record (nil when none) in one
	// write transaction and stores what fn returns (nil deletes it).
	UpdateMaintenance(ctx context.Context, fn func(m *Maintenance) (*Maintenance, error)) (*Maintenance, error)
}

// VersionInfo is the `version` object of the status response.
type VersionInfo struct {
	Running         string       `json:"running"`
	Latest          *string      `json:"latest"`
	UpdateAvailable *bool        `json:"updateAvailable"`
	ReleaseURL      *string      `json:"releaseUrl"`
	UpdateCheck     string       `json:"updateCheck" enum:"disabled,pending,ok,failed"`
	CheckedAt       *Time        `json:"checkedAt"`
	Channel         string       `json:"channel" enum:"stable,beta"`
	LatestTag       *string      `json:"latestTag"`
	PublishedAt     *Time        `json:"publishedAt"`
	CheckError      *string      `json:"checkError"`
	Maintenance     *Maintenance `json:"maintenance"`
}

// VersionCheckService stores the update-check cache, one row per channel.
type VersionCheckService interface {
	VersionCheck(ctx context.Context, channel string) (*VersionCheck, error)
	SaveVersionCheck(ctx context.Context, c *VersionCheck) error
}

// BuildVersionInfo derives the version object from local state only.
// A check result counts only if it is for the current channel and newer
// than the moment the check was turned on; until then the state is pending.
// When the last check failed, the newest successful facts are not kept:
// latest and updateAvailable are null (not known).
func BuildVersionInfo(running string, s *Settings, c *VersionCheck) VersionInfo {
	v := VersionInfo{Running: running, Channel: s.UpdateChannel, UpdateCheck: UpdateCheckDisabled}
	if !s.UpdateCheck {
		return v
	}
	if c == nil || c.Channel != s.UpdateChannel || (s.UpdateCheckEnabledAt != nil && c.CheckedAt.Before(*s.UpdateCheckEnabledAt)) {
		v.UpdateCheck = UpdateCheckPending
		return v
	}
	v.CheckedAt = AtPtr(&c.CheckedAt)
	if c.CheckError != "" {
		v.UpdateCheck = UpdateCheckFailed
		v.CheckError = Ptr(c.CheckError)
		return v
	}
	v.UpdateCheck = UpdateCheckOK
	v.Latest, v.LatestTag, v.ReleaseURL, v.PublishedAt = Ptr(c.Latest), Ptr(c.LatestTag), Ptr(c.ReleaseURL), AtPtr(c.PublishedAt)
	if newer, ok := SemverNewer(c.Latest, running); ok {
		v.UpdateAvailable = Ptr(newer)
	}
	return v
}
