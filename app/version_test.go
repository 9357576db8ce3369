package app

import (
	"encoding/json"
	"testing"
	"time"
)

func TestBuildVersionInfo(t *testing.T) {
	enabledAt := t0.Add(-time.Hour)
	published := t0.Add(-48 * time.Hour)
	okCheck := &VersionCheck{Channel: "stable", CheckedAt: t0.Add(-time.Minute), LatestTag: "v1.3.0", Latest: "1.3.0",
		ReleaseURL: "https://example.test/r/v1.3.0", PublishedAt: &published}
	tests := []struct {
		name     string
		running  string
		settings Settings
		check    *VersionCheck
		want     string // JSON of the fields that matter
	}{
		{"fresh install: disabled, no check", "1.2.0", Settings{UpdateChannel: "stable"}, nil,
			`{"running":"1.2.0","latest":null,"updateAvailable":null,"releaseUrl":null,"updateCheck":"disabled","checkedAt":null,"channel":"stable","latestTag":null,"publishedAt":null,"checkError":null,"maintenance":null}`},
		{"disabled hides a stored result", "1.2.0", Settings{UpdateChannel: "stable"}, okCheck,
			`{"running":"1.2.0","latest":null,"updateAvailable":null,"releaseUrl":null,"updateCheck":"disabled","checkedAt":null,"channel":"stable","latestTag":null,"publishedAt":null,"checkError":null,"maintenance":null}`},
		{"enabled, no check yet: pending", "1.2.0", Settings{UpdateCheck: true, UpdateChannel: "stable", UpdateCheckEnabledAt: &enabledAt}, nil,
			`{"running":"1.2.0","latest":null,"updateAvailable":null,"releaseUrl":null,"updateCheck":"pending","checkedAt":null,"channel":"stable","latestTag":null,"publishedAt":null,"checkError":null,"maintenance":null}`},
		{"check older than enabling: pending", "1.2.0", Settings{UpdateCheck: true, UpdateChannel: "stable", UpdateCheckEnabledAt: &enabledAt},
			&VersionCheck{Channel: "stable", CheckedAt: enabledAt.Add(-time.Millisecond), Latest: "1.3.0", LatestTag: "v1.3.0"},
			`{"running":"1.2.0","latest":null,"updateAvailable":null,"releaseUrl":null,"updateCheck":"pending","checkedAt":null,"channel":"stable","latestTag":null,"publishedAt":null,"checkError":null,"maintenance":null}`},
		{"ok: newer release available", "1.2.0", Settings{UpdateCheck: true, UpdateChannel: "stable", UpdateCheckEnabledAt: &enabledAt}, okCheck,
			`{"running":"1.2.0","latest":"1.3.0","updateAvailable":true,"releaseUrl":"https://example.test/r/v1.3.0","updateCheck":"ok","checkedAt":"2026-11-21T14:59:00.000Z","channel":"stable","latestTag":"v1.3.0","publishedAt":"2026-11-19T15:00:00.000Z","checkError":null,"maintenance":null}`},
		{"ok: running the latest", "1.3.0", Settings{UpdateCheck: true, UpdateChannel: "stable"}, okCheck,
			`{"running":"1.3.0","latest":"1.3.0","updateAvailable":false,"releaseUrl":"https://example.test/r/v1.3.0","updateCheck":"ok","checkedAt":"2026-11-21T14:59:00.000Z","channel":"stable","latestTag":"v1.3.0","publishedAt":"2026-11-19T15:00:00.000Z","checkError":null,"maintenance":null}`},
		{"ok: development build is older than any release", "0.0.0-dev", Settings{UpdateCheck: true, UpdateChannel: "stable"}, okCheck,
			`{"running":"0.0.0-dev","latest":"1.3.0","updateAvailable":true,"releaseUrl":"https://example.test/r/v1.3.0","updateCheck":"ok","checkedAt":"2026-11-21T14:59:00.000Z","channel":"stable","latestTag":"v1.3.0","publishedAt":"2026-11-19T15:00:00.000Z","checkError":null,"maintenance":null}`},
		{"ok: unparsable running version leaves updateAvailable null", "custom-build", Settings{UpdateCheck: true, UpdateChannel: "stable"}, okCheck,
			`{"running":"custom-build","latest":"1.3.0","updateAvailable":null,"releaseUrl":"https://example.test/r/v1.3.0","updateCheck":"ok","checkedAt":"2026-11-21T14:59:00.000Z","channel":"stable","latestTag":"v1.3.0","publishedAt":"2026-11-19T15:00:00.000Z","checkError":null,"maintenance":null}`},
		{"failed: reason shown, facts unknown", "1.2.0", Settings{UpdateCheck: true, UpdateChannel: "stable"},
			&VersionCheck{Channel: "stable", CheckedAt: t0, CheckError: "rate_limited", Latest: "1.3.0"},
			`{"running":"1.2.0","latest":null,"updateAvailable":null,"releaseUrl":null,"updateCheck":"failed","checkedAt":"2026-11-21T15:00:00.000Z","channel":"stable","latestTag":null,"publishedAt":null,"checkError":"rate_limited","maintenance":null}`},
		{"channel switched: the other channel's result does not count", "1.2.0", Settings{UpdateCheck: true, UpdateChannel: "beta"}, okCheck,
			`{"running":"1.2.0","latest":null,"updateAvailable":null,"releaseUrl":null,"updateCheck":"pending","checkedAt":null,"channel":"beta","latestTag":null,"publishedAt":null,"checkError":null,"maintenance":null}`},
		{"beta channel result", "1.2.0", Settings{UpdateCheck: true, UpdateChannel: "beta"},
			&VersionCheck{Channel: "beta", CheckedAt: t0, LatestTag: "v1.3.0-beta.2", Latest: "1.3.0-beta.2", ReleaseURL: "u"},
			`{"running":"1.2.0","latest":"1.3.0-beta.2","updateAvailable":true,"releaseUrl":"u","updateCheck":"ok","checkedAt":"2026-11-21T15:00:00.000Z","channel":"beta","latestTag":"v1.3.0-beta.2","publishedAt":null,"checkError":null,"maintenance":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(BuildVersionInfo(tt.running, &tt.settings, tt.check))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestCompareSemver(t *testing.T) {
	// Each version is lower than the next (semver.org §11 example and more).
	ordered := []string{
		"0.0.0-dev", "0.9.9", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "v1.0.1", "1.1.0", "1.10.0", "2.0.0",
	}
	for i := range ordered {
		for j := range ordered {
			got, ok := CompareSemver(ordered[i], ordered[j])
			want := sign(i - j)
			if !ok || got != want {
				t.Errorf("CompareSemver(%s, %s) = %d, %v; want %d", ordered[i], ordered[j], got, ok, want)
			}
		}
	}
	for _, eq := range [][2]string{{"v1.2.3", "1.2.3"}, {"1.2.3+build.5", "1.2.3"}, {"1.2.3-rc.1+x", "1.2.3-rc.1"}} {
		if c, ok := CompareSemver(eq[0], eq[1]); !ok || c != 0 {
			t.Errorf("CompareSemver(%s, %s) = %d, %v; want equal", eq[0], eq[1], c, ok)
		}
	}
	for _, bad := range []string{"", "1", "1.2", "1.2.3.4", "01.2.3", "1.02.3", "1.2.-3", "1.2.3-", "1.2.3-a..b", "a.b.c", "vv1.2.3", "1.2.3 "} {
		if ValidSemver(bad) {
			t.Errorf("ValidSemver(%q) = true", bad)
		}
		if _, ok := CompareSemver(bad, "1.0.0"); ok {
			t.Errorf("CompareSemver(%q, 1.0.0) ok", bad)
		}
	}
	if newer, ok := SemverNewer("v1.3.0", "1.2.9"); !newer || !ok {
		t.Errorf("SemverNewer(v1.3.0, 1.2.9) = %v, %v", newer, ok)
	}
	if newer, ok := SemverNewer("1.2.9", "1.2.9"); newer || !ok {
		t.Errorf("SemverNewer(equal) = %v, %v", newer, ok)
	}
}

func TestTimeWireForm(t *testing.T) {
	in := time.Date(2026, 11, 21, 16, 8, 9, 123987654, time.FixedZone("CET", 3600))
	b, _ := json.Marshal(At(in))
	if string(b) != `"2026-11-21T15:08:09.123Z"` {
		t.Errorf("marshal = %s", b)
	}
	var back Time
	if err := json.Unmarshal([]byte(`"2026-11-21T16:08:09.1239+01:00"`), &back); err != nil || back.String() != "2026-11-21T15:08:09.123Z" {
		t.Errorf("unmarshal = %v, %v", back, err)
	}
	for _, bad := range []string{`123`, `"yesterday"`, `"`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("unmarshal %s: no error", bad)
		}
	}
	if AtPtr(nil) != nil {
		t.Error("AtPtr(nil) != nil")
	}
}
