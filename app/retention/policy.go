// Package retention applies snapshot retention (CONTRACT §11): which
// snapshots of a protected object or of an endpoint's restic repository to
// keep, and the nightly retention job that forgets the rest and frees their
// space.
//
// The policy is tiered by age: keep every snapshot for KeepAllDays, then
// the newest of each UTC day up to KeepDailyDays, of each ISO week up to
// KeepWeeklyDays, of each month up to KeepMonthlyDays; older ones go, but
// the newest snapshot is never forgotten. Select decides it for the blob
// store's snapshots; endpoint repositories get the same policy as the
// flags of `restic forget --prune` (ResticArgs), which restic evaluates
// itself. docs/retention.md explains both with an example timeline.
package retention

import (
	"fmt"
	"sort"
	"time"

	"backstop/app"
)

// Policy is a tenant's or an endpoint's retention policy.
type Policy = app.RetentionPolicy

// MaxDays bounds every tier (100 years): enough for any legal retention,
// and far from overflowing date arithmetic.
const MaxDays = 36500

// Default is the policy of a tenant that never saved one: keep every
// snapshot 30 days, then one per UTC day up to 90 days, one per ISO week up
// to a year, one per month up to 7 years (2557 days).
func Default() Policy {
	return Policy{KeepAllDays: 30, KeepDailyDays: 90, KeepWeeklyDays: 365, KeepMonthlyDays: 2557}
}

// Validate checks a policy: every tier between 0 and MaxDays, and each tier
// that is not 0 (skipped) at least as long as every tier before it, since a
// later tier thins out older snapshots than the one before. field is the
// request location of the policy ("body", "body.policy"); the error names
// the offending field under it.
func Validate(p Policy, field string) error {
	tiers := []struct {
		name string
		days int
	}{{"keepAllDays", p.KeepAllDays}, {"keepDailyDays", p.KeepDailyDays}, {"keepWeeklyDays", p.KeepWeeklyDays},
		{"keepMonthlyDays", p.KeepMonthlyDays}}
	prev, prevName := 0, ""
	for _, t := range tiers {
		loc := t.name
		if field != "" {
			loc = field + "." + t.name
		}
		switch {
		case t.days < 0:
			return app.FieldError(loc, "%s must not be negative (0 skips the tier)", t.name)
		case t.days > MaxDays:
			return app.FieldError(loc, "%s must be at most %d days", t.name, MaxDays)
		case t.days == 0:
			continue
		case t.days < prev:
			return app.FieldError(loc, "%s (%d) must be 0 or at least %s (%d): each tier keeps older snapshots than the one before",
				t.name, t.days, prevName, prev)
		}
		prev, prevName = t.days, t.name
	}
	return nil
}

// Snap is one snapshot as Select sees it.
type Snap struct {
	ID string
	At time.Time
}

// Select splits snapshots into those the policy keeps and those it
// forgets, both newest first. Ages are measured back from now; days, ISO
// weeks and months are those of UTC. A snapshot is within a tier of N days
// when it is taken after now minus N calendar days (strictly after, as
// restic's --keep-within-* measure). In each daily, weekly and monthly
// bucket within its tier the newest snapshot is kept. The newest snapshot
// overall is always kept, whatever its age, so an object whose backups
// stopped keeps its last state. A snapshot dated in the future is within
// every tier. Equal times are ordered by id, so the outcome is
// deterministic.
func Select(snaps []Snap, now time.Time, p Policy) (keep, forget []string) {
	list := append([]Snap(nil), snaps...)
	sort.Slice(list, func(i, j int) bool {
		if !list[i].At.Equal(list[j].At) {
			return list[i].At.After(list[j].At)
		}
		return list[i].ID > list[j].ID
	})
	now = now.UTC()
	within := func(t time.Time, days int) bool {
		return days > 0 && t.After(now.AddDate(0, 0, -days))
	}
	tiers := []struct {
		days   int
		bucket func(time.Time) int
		last   int
	}{
		{p.KeepDailyDays, func(t time.Time) int { return t.Year()*10000 + int(t.Month())*100 + t.Day() }, -1},
		{p.KeepWeeklyDays, func(t time.Time) int { y, w := t.ISOWeek(); return y*100 + w }, -1},
		{p.KeepMonthlyDays, func(t time.Time) int { return t.Year()*100 + int(t.Month()) }, -1},
	}
	for i, s := range list {
		t := s.At.UTC()
		kept := i == 0 || within(t, p.KeepAllDays)
		for k := range tiers {
			if !within(t, tiers[k].days) {
				continue
			}
			if b := tiers[k].bucket(t); b != tiers[k].last {
				tiers[k].last = b
				kept = true
			}
		}
		if kept {
			keep = append(keep, s.ID)
		} else {
			forget = append(forget, s.ID)
		}
	}
	return keep, forget
}

// ResticArgs maps a policy to the arguments of `restic forget` (restic 0.14
// and later): --keep-within and --keep-within-daily/-weekly/-monthly with
// the tier in days, a skipped tier omitted, and always --keep-last 1 so the
// newest snapshot of every group survives. restic measures the durations
// back from the newest snapshot of each group (not from now) and buckets
// days, weeks and months in the time zone the snapshot was taken in;
// grouping stays restic's default (host and paths).
func ResticArgs(p Policy) []string {
	args := []string{"--keep-last", "1"}
	for _, t := range []struct {
		flag string
		days int
	}{{"--keep-within", p.KeepAllDays}, {"--keep-within-daily", p.KeepDailyDays},
		{"--keep-within-weekly", p.KeepWeeklyDays}, {"--keep-within-monthly", p.KeepMonthlyDays}} {
		if t.days > 0 {
			args = append(args, t.flag, fmt.Sprintf("%dd", t.days))
		}
	}
	return args
}
