package retention

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"backstop/app"
)

func day(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }

func snapsAt(times ...time.Time) []Snap {
	out := make([]Snap, len(times))
	for i, t := range times {
		out[i] = Snap{ID: fmt.Sprintf("s%02d", i), At: t}
	}
	return out
}

func TestSelect(t *testing.T) {
	now := day(2026, 11, 21, 12) // a Saturday
	def := Default()
	tests := []struct {
		name       string
		snaps      []Snap
		policy     Policy
		wantForget []string
	}{
		{"empty", nil, def, nil},
		{"one snapshot, very old, is the newest: kept", snapsAt(day(2010, 1, 1, 0)), def, nil},
		{"all old: only the newest stays",
			snapsAt(day(2012, 1, 1, 0), day(2011, 1, 1, 0), day(2010, 1, 1, 0)), def, []string{"s01", "s02"}},
		{"within keepAll every snapshot stays, even several a day",
			snapsAt(now.Add(-time.Hour), now.Add(-2*time.Hour), now.Add(-29*24*time.Hour)), def, nil},
		{"daily tier keeps the newest of a UTC day",
			// 40 days old: three on one UTC day; the 23:30 one is newest.
			[]Snap{{"new", now}, {"a", day(2026, 10, 12, 1)}, {"b", day(2026, 10, 12, 23).Add(30 * time.Minute)}, {"c", day(2026, 10, 12, 12)}},
			def, []string{"c", "a"}},
		{"UTC day, not local: 23:30-05:00 is the next UTC day",
			[]Snap{{"new", now}, {"local", time.Date(2026, 10, 11, 23, 30, 0, 0, time.FixedZone("EST", -5*3600))}, {"utc", day(2026, 10, 12, 2)}},
			// "local" is 2026-10-12 04:30 UTC: the same UTC day as "utc", and newer.
			def, []string{"utc"}},
		{"weekly tier keeps the newest of an ISO week",
			// 2026-06-01 is a Monday; 06-07 the Sunday of the same ISO week.
			[]Snap{{"new", now}, {"mon", day(2026, 6, 1, 10)}, {"sun", day(2026, 6, 7, 10)}, {"nextmon", day(2026, 6, 8, 10)}},
			def, []string{"mon"}},
		{"ISO week across a year end",
			// 2025-12-29 (Mon) to 2026-01-04 (Sun) is ISO week 2026-W01.
			[]Snap{{"new", now}, {"dec", day(2025, 12, 30, 0)}, {"jan", day(2026, 1, 2, 0)}},
			Policy{KeepWeeklyDays: 400}, []string{"dec"}},
		{"monthly tier keeps the newest of a month",
			[]Snap{{"new", now}, {"early", day(2024, 3, 1, 0)}, {"late", day(2024, 3, 31, 23)}, {"feb", day(2024, 2, 29, 0)}},
			def, []string{"early"}},
		{"older than every tier goes",
			[]Snap{{"new", now}, {"m", day(2020, 1, 1, 0)}, {"old", day(2019, 11, 1, 0)}},
			def, []string{"old"}},
		{"keepAll boundary: exactly 30 days old is out, a millisecond younger is in",
			[]Snap{{"new", now}, {"in", now.AddDate(0, 0, -30).Add(time.Millisecond)}, {"edge", now.AddDate(0, 0, -30)}},
			Policy{KeepAllDays: 30}, []string{"edge"}},
		{"daily boundary at 90 days",
			[]Snap{{"new", now}, {"d89", now.AddDate(0, 0, -89)}, {"d90", now.AddDate(0, 0, -90)}},
			Policy{KeepDailyDays: 90}, []string{"d90"}},
		{"skipped daily tier: weekly takes over after keepAll",
			[]Snap{{"new", now}, {"w1", day(2026, 10, 1, 0)}, {"w1b", day(2026, 9, 30, 0)}},
			Policy{KeepAllDays: 30, KeepWeeklyDays: 365}, []string{"w1b"}},
		{"zero policy keeps only the newest",
			snapsAt(now, now.Add(-time.Hour), now.Add(-48*time.Hour)), Policy{}, []string{"s01", "s02"}},
		{"future snapshot is kept and counts as newest",
			[]Snap{{"future", now.Add(24 * time.Hour)}, {"old", day(2000, 1, 1, 0)}}, def, []string{"old"}},
		{"equal times ordered by id",
			[]Snap{{"a", day(2010, 1, 1, 0)}, {"b", day(2010, 1, 1, 0)}}, def, []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keep, forget := Select(tc.snaps, now, tc.policy)
			if !slices.Equal(forget, tc.wantForget) {
				t.Fatalf("forget = %v, want %v (keep %v)", forget, tc.wantForget, keep)
			}
			if len(keep)+len(forget) != len(tc.snaps) {
				t.Fatalf("keep %v + forget %v do not cover %d snapshots", keep, forget, len(tc.snaps))
			}
			if len(tc.snaps) > 0 && len(keep) == 0 {
				t.Fatal("the newest snapshot was forgotten")
			}
		})
	}
}

// TestSelectDailyBackupsOverYears checks the shape of the default policy
// on one snapshot a day for three years: 30 + 60 daily + weekly + monthly.
func TestSelectDailyBackupsOverYears(t *testing.T) {
	now := day(2026, 11, 21, 1)
	var snaps []Snap
	for i := 0; i < 3*365; i++ {
		snaps = append(snaps, Snap{ID: fmt.Sprintf("d%04d", i), At: now.AddDate(0, 0, -i)})
	}
	keep, forget := Select(snaps, now, Default())
	if len(keep)+len(forget) != len(snaps) {
		t.Fatal("not a partition")
	}
	byID := map[string]time.Time{}
	for _, s := range snaps {
		byID[s.ID] = s.At
	}
	var all, daily, weekly, monthly int
	for _, id := range keep {
		age := now.Sub(byID[id])
		switch {
		case age < 30*24*time.Hour:
			all++
		case age < 90*24*time.Hour:
			daily++
		case age < 365*24*time.Hour:
			weekly++
		default:
			monthly++
		}
	}
	if all != 30 || daily != 60 {
		t.Errorf("kept %d in the first 30 days and %d in days 30-90, want 30 and 60", all, daily)
	}
	// About (365-90)/7 week ends plus the month ends that are not week
	// ends: the tiers add up, as restic's do.
	if weekly < 39 || weekly > 49 {
		t.Errorf("kept %d snapshots between 90 days and a year, want 39 weekly plus up to 10 monthly", weekly)
	}
	if monthly < 23 || monthly > 25 {
		t.Errorf("kept %d monthly snapshots older than a year, want about 24", monthly)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		p         Policy
		wantField string
	}{
		{Default(), ""},
		{Policy{}, ""},
		{Policy{KeepAllDays: 7}, ""},
		{Policy{KeepAllDays: 30, KeepWeeklyDays: 365}, ""},
		{Policy{KeepAllDays: 30, KeepDailyDays: 30, KeepWeeklyDays: 30, KeepMonthlyDays: 30}, ""},
		{Policy{KeepAllDays: -1}, "body.keepAllDays"},
		{Policy{KeepMonthlyDays: MaxDays + 1}, "body.keepMonthlyDays"},
		{Policy{KeepAllDays: 30, KeepDailyDays: 10}, "body.keepDailyDays"},
		{Policy{KeepAllDays: 30, KeepDailyDays: 0, KeepWeeklyDays: 20}, "body.keepWeeklyDays"},
		{Policy{KeepAllDays: 30, KeepDailyDays: 90, KeepWeeklyDays: 365, KeepMonthlyDays: 100}, "body.keepMonthlyDays"},
	}
	for _, tc := range tests {
		err := Validate(tc.p, "body")
		var ae *app.Error
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("%+v: %v", tc.p, err)
		case tc.wantField != "" && (err == nil || !asError(err, &ae) || ae.Field != tc.wantField || ae.Code != app.EINVALID):
			t.Errorf("%+v: error %v, want a validation error on %s", tc.p, err, tc.wantField)
		}
	}
	if err := Validate(Policy{KeepAllDays: 30, KeepDailyDays: 10}, "body.policy"); err == nil || !strings.Contains(err.Error(), "body.policy.keepDailyDays") {
		t.Errorf("nested field: %v", err)
	}
}

func asError(err error, target **app.Error) bool {
	e, ok := err.(*app.Error)
	*target = e
	return ok
}

func TestResticArgs(t *testing.T) {
	tests := []struct {
		p    Policy
		want string
	}{
		{Default(), "--keep-last 1 --keep-within 30d --keep-within-daily 90d --keep-within-weekly 365d --keep-within-monthly 2557d"},
		{Policy{KeepAllDays: 7, KeepMonthlyDays: 400}, "--keep-last 1 --keep-within 7d --keep-within-monthly 400d"},
		{Policy{}, "--keep-last 1"},
	}
	for _, tc := range tests {
		if got := strings.Join(ResticArgs(tc.p), " "); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.p, got, tc.want)
		}
	}
}
