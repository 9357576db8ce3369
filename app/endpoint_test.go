package app

import (
	"testing"
	"time"
)

// t0 is the fixed "now" of the endpoint rule tests.
var t0 = time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)

func ago(d time.Duration) *time.Time { t := t0.Add(-d); return &t }

// healthyEndpoint is a server seen a minute ago whose newest snapshot passed
// its restore test; each case changes the facts it is about.
func healthyEndpoint() Endpoint {
	return Endpoint{
		ID: "ep_1", TenantID: "tn_1", Hostname: "db1", Profile: ProfileServer, Status: EndpointActive,
		CreatedAt: t0.Add(-30 * 24 * time.Hour), Schedule: DefaultEndpointSchedule,
		LastSeenAt: ago(time.Minute), LastBackupAt: ago(14 * time.Hour), LastBackupState: "succeeded",
		LastSuccessAt: ago(14 * time.Hour), LastSnapshotID: "snap2",
		VerifyState: VerifyPassed, VerifyCheckedAt: ago(13 * time.Hour), VerifyPassedSnapshotID: "snap2",
	}
}

func TestEndpointViewReadinessAndAttention(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name           string
		change         func(e *Endpoint)
		wantReadiness  string
		wantOverdue    bool
		wantAttention  string // "" means null
		wantConnection string
	}{
		{"green: newest snapshot passed its test", func(e *Endpoint) {}, ReadinessGreen, false, "", ConnectionOnline},
		{"no_backup: no snapshot yet", func(e *Endpoint) {
			e.LastSnapshotID, e.LastSuccessAt, e.LastBackupAt, e.LastBackupState = "", nil, nil, ""
			e.VerifyState, e.VerifyPassedSnapshotID, e.VerifyCheckedAt = "", "", nil
			e.CreatedAt = t0.Add(-time.Hour)
		}, ReadinessNoBackup, false, "", ConnectionOnline},
		{"no_backup wins over a damaged repository", func(e *Endpoint) {
			e.LastSnapshotID, e.RepositoryDamaged = "", true
		}, ReadinessNoBackup, false, AttentionRepositoryDamaged, ConnectionOnline},
		{"unverified: snapshots but no passing test", func(e *Endpoint) {
			e.VerifyState, e.VerifyPassedSnapshotID, e.VerifyCheckedAt = "", "", nil
		}, ReadinessUnverified, false, "", ConnectionOnline},
		{"yellow: last passing test is of an older snapshot", func(e *Endpoint) {
			e.VerifyPassedSnapshotID = "snap1"
		}, ReadinessYellow, false, "", ConnectionOnline},
		{"yellow: overdue although the newest snapshot passed", func(e *Endpoint) {
			e.LastSuccessAt = ago(36*time.Hour + time.Millisecond)
		}, ReadinessYellow, true, AttentionBackupOverdue, ConnectionOnline},
		{"red: the latest restore test failed", func(e *Endpoint) {
			e.VerifyState = VerifyFailed
		}, ReadinessRed, false, AttentionRestoreTestFailed, ConnectionOnline},
		{"red: repository damaged", func(e *Endpoint) {
			e.RepositoryDamaged = true
		}, ReadinessRed, false, AttentionRepositoryDamaged, ConnectionOnline},
		{"red beats unverified", func(e *Endpoint) {
			e.VerifyState, e.VerifyPassedSnapshotID = VerifyFailed, ""
		}, ReadinessRed, false, AttentionRestoreTestFailed, ConnectionOnline},

		// Attention order: the first that applies wins.
		{"attention: damaged before restore test failed", func(e *Endpoint) {
			e.RepositoryDamaged, e.VerifyState, e.LastBackupState = true, VerifyFailed, "failed"
			e.LastSuccessAt, e.LastSeenAt = ago(10*day), nil
		}, ReadinessRed, true, AttentionRepositoryDamaged, ConnectionNever},
		{"attention: restore test failed before backup failed", func(e *Endpoint) {
			e.VerifyState, e.LastBackupState, e.LastSuccessAt = VerifyFailed, "failed", ago(10*day)
		}, ReadinessRed, true, AttentionRestoreTestFailed, ConnectionOnline},
		{"attention: backup failed before overdue", func(e *Endpoint) {
			e.LastBackupState, e.LastSuccessAt = "failed", ago(10*day)
		}, ReadinessYellow, true, AttentionLastBackupFailed, ConnectionOnline},
		{"attention: overdue before silent", func(e *Endpoint) {
			e.LastSuccessAt, e.LastSeenAt = ago(10*day), ago(10*day)
		}, ReadinessYellow, true, AttentionBackupOverdue, ConnectionOffline},
		{"attention: silent server after 15 minutes", func(e *Endpoint) {
			e.LastSeenAt = ago(15*time.Minute + time.Millisecond)
		}, ReadinessGreen, false, AttentionSilent, ConnectionOffline},
		{"attention: never seen", func(e *Endpoint) {
			e.LastSeenAt = nil
		}, ReadinessGreen, false, AttentionNeverSeen, ConnectionNever},
		{"a partial backup is not a failed one", func(e *Endpoint) {
			e.LastBackupState = "partial"
		}, ReadinessGreen, false, "", ConnectionOnline},
		{"an interrupted run is not a failure", func(e *Endpoint) {
			e.LastBackupState = "interrupted"
		}, ReadinessGreen, false, "", ConnectionOnline},

		// Connection: the 15-minute boundary is inclusive.
		{"online at exactly 15 minutes", func(e *Endpoint) {
			e.LastSeenAt = ago(15 * time.Minute)
		}, ReadinessGreen, false, "", ConnectionOnline},
		{"offline one millisecond after 15 minutes", func(e *Endpoint) {
			e.LastSeenAt = ago(15*time.Minute + time.Millisecond)
		}, ReadinessGreen, false, AttentionSilent, ConnectionOffline},

		// Silent thresholds per profile (client default 72h).
		{"client offline 71h is not silent", func(e *Endpoint) {
			e.Profile, e.LastSeenAt = ProfileClient, ago(71*time.Hour)
		}, ReadinessGreen, false, "", ConnectionOffline},
		{"client offline exactly 72h is not silent", func(e *Endpoint) {
			e.Profile, e.LastSeenAt = ProfileClient, ago(72*time.Hour)
		}, ReadinessGreen, false, "", ConnectionOffline},
		{"client offline over 72h is silent", func(e *Endpoint) {
			e.Profile, e.LastSeenAt = ProfileClient, ago(72*time.Hour+time.Second)
		}, ReadinessGreen, false, AttentionSilent, ConnectionOffline},

		// Overdue: schedule interval plus half an interval.
		{"daily: 36h since success is not overdue", func(e *Endpoint) {
			e.LastSuccessAt = ago(36 * time.Hour)
		}, ReadinessGreen, false, "", ConnectionOnline},
		{"hourly: 91 minutes since success is overdue", func(e *Endpoint) {
			e.Schedule, e.LastSuccessAt = "0 * * * *", ago(91*time.Minute)
		}, ReadinessYellow, true, AttentionBackupOverdue, ConnectionOnline},
		{"hourly: 89 minutes since success is not overdue", func(e *Endpoint) {
			e.Schedule, e.LastSuccessAt = "0 * * * *", ago(89*time.Minute)
		}, ReadinessGreen, false, "", ConnectionOnline},
		{"never succeeded: overdue counts from creation", func(e *Endpoint) {
			e.LastSnapshotID, e.LastSuccessAt, e.VerifyState, e.VerifyPassedSnapshotID = "", nil, "", ""
			e.CreatedAt = t0.Add(-37 * time.Hour)
		}, ReadinessNoBackup, true, AttentionBackupOverdue, ConnectionOnline},
		{"never succeeded, created 35h ago: not yet overdue", func(e *Endpoint) {
			e.LastSnapshotID, e.LastSuccessAt, e.VerifyState, e.VerifyPassedSnapshotID = "", nil, "", ""
			e.CreatedAt = t0.Add(-35 * time.Hour)
		}, ReadinessNoBackup, false, "", ConnectionOnline},
		{"no schedule: never overdue", func(e *Endpoint) {
			e.Schedule, e.LastSuccessAt = "", ago(400*day)
		}, ReadinessGreen, false, "", ConnectionOnline},
		{"invalid schedule: never overdue", func(e *Endpoint) {
			e.Schedule, e.LastSuccessAt = "not cron", ago(400*day)
		}, ReadinessGreen, false, "", ConnectionOnline},

		// A revoked endpoint never needs attention, whatever its facts.
		{"revoked: no attention", func(e *Endpoint) {
			e.Status, e.RepositoryDamaged, e.LastSeenAt = EndpointRevoked, true, nil
		}, ReadinessRed, false, "", ConnectionNever},
		{"revoked and overdue: no attention", func(e *Endpoint) {
			e.Status, e.LastSuccessAt = EndpointRevoked, ago(10*day)
		}, ReadinessYellow, true, "", ConnectionOnline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := healthyEndpoint()
			tt.change(&e)
			v := e.View(t0, DefaultEndpointRules())
			if v.Readiness.State != tt.wantReadiness {
				t.Errorf("readiness = %s, want %s", v.Readiness.State, tt.wantReadiness)
			}
			if v.Readiness.Overdue != tt.wantOverdue {
				t.Errorf("overdue = %v, want %v", v.Readiness.Overdue, tt.wantOverdue)
			}
			got := ""
			if v.Attention != nil {
				got = *v.Attention
			}
			if got != tt.wantAttention {
				t.Errorf("attention = %q, want %q", got, tt.wantAttention)
			}
			if v.Connection != tt.wantConnection {
				t.Errorf("connection = %s, want %s", v.Connection, tt.wantConnection)
			}
		})
	}
}

func TestEndpointViewConfiguredSilentThresholds(t *testing.T) {
	rules := EndpointRules{SilentAfterServer: time.Hour, SilentAfterClient: 2 * time.Hour}
	for _, tt := range []struct {
		profile string
		seen    time.Duration
		silent  bool
	}{
		{ProfileServer, 59 * time.Minute, false},
		{ProfileServer, 61 * time.Minute, true},
		{ProfileClient, 119 * time.Minute, false},
		{ProfileClient, 121 * time.Minute, true},
	} {
		e := healthyEndpoint()
		e.Profile, e.LastSeenAt = tt.profile, ago(tt.seen)
		v := e.View(t0, rules)
		if got := v.Attention != nil && *v.Attention == AttentionSilent; got != tt.silent {
			t.Errorf("%s seen %s ago: silent = %v, want %v", tt.profile, tt.seen, got, tt.silent)
		}
		if v.Connection != ConnectionOffline {
			t.Errorf("%s seen %s ago: connection = %s, want offline (15m rule)", tt.profile, tt.seen, v.Connection)
		}
	}
}

func TestEndpointViewCopiesFacts(t *testing.T) {
	e := healthyEndpoint()
	e.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC)
	v := e.View(t0, DefaultEndpointRules())
	if v.DisplayName != "db1" {
		t.Errorf("displayName = %q, want the hostname when unset", v.DisplayName)
	}
	if got := v.CreatedAt.String(); got != "2026-01-02T03:04:05.678Z" {
		t.Errorf("createdAt = %s, want millisecond UTC", got)
	}
	if v.Readiness.CheckedAt == nil || !v.Readiness.CheckedAt.Equal(*e.VerifyCheckedAt) {
		t.Errorf("readiness.checkedAt = %v, want %v", v.Readiness.CheckedAt, e.VerifyCheckedAt)
	}
	e.DisplayName = "Database"
	if v := e.View(t0, DefaultEndpointRules()); v.DisplayName != "Database" {
		t.Errorf("displayName = %q", v.DisplayName)
	}
}

func TestScheduleInterval(t *testing.T) {
	for _, tt := range []struct {
		schedule string
		want     time.Duration
	}{
		{"0 1 * * *", 24 * time.Hour},
		{"@hourly", time.Hour},
		{"*/15 * * * *", 15 * time.Minute},
		{"0 3 * * 0", 7 * 24 * time.Hour},
		{"", 0},
		{"garbage", 0},
		{"0 0 30 2 *", 0}, // February 30th never comes
	} {
		if got := ScheduleInterval(tt.schedule, t0); got != tt.want {
			t.Errorf("ScheduleInterval(%q) = %s, want %s", tt.schedule, got, tt.want)
		}
	}
	if err := ValidateSchedule("61 * * * *"); ErrorCode(err) != EINVALID {
		t.Errorf("ValidateSchedule(bad) = %v, want validation error", err)
	}
	if err := ValidateSchedule("@daily"); err != nil {
		t.Errorf("ValidateSchedule(@daily) = %v", err)
	}
}

func TestCountEndpoints(t *testing.T) {
	a, b, c := healthyEndpoint(), healthyEndpoint(), healthyEndpoint()
	b.Profile, b.LastSeenAt, b.LastSuccessAt = ProfileClient, nil, ago(time.Hour)
	c.Status, c.LastSuccessAt = EndpointRevoked, nil
	views := []EndpointView{a.View(t0, DefaultEndpointRules()), b.View(t0, DefaultEndpointRules()), c.View(t0, DefaultEndpointRules())}
	got := CountEndpoints(views)
	if got.Total != 3 || got.Servers != 2 || got.Clients != 1 || got.Revoked != 1 || got.NeedingAttention != 1 {
		t.Errorf("counts = %+v", got)
	}
	if got.LastSuccessAt == nil || !got.LastSuccessAt.Equal(*b.LastSuccessAt) {
		t.Errorf("lastSuccessAt = %v, want the newest success %v", got.LastSuccessAt, b.LastSuccessAt)
	}
	if empty := CountEndpoints(nil); empty.Total != 0 || empty.LastSuccessAt != nil {
		t.Errorf("empty counts = %+v", empty)
	}
}
