package app

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// The memoized interval must equal a fresh computation at every instant,
// including seconds within a minute, minute boundaries, DST changes and
// schedules that do not parse.
func TestScheduleIntervalMemoMatchesDirect(t *testing.T) {
	direct := func(schedule string, now time.Time) time.Duration {
		s, err := cron.ParseStandard(schedule)
		if err != nil {
			return 0
		}
		next := s.Next(now)
		return s.Next(next).Sub(next)
	}
	schedules := []string{"0 1 * * *", "*/15 * * * *", "30 2 * * 1-5", "@every 90s", "@hourly",
		"CRON_TZ=Europe/Berlin 30 2 * * *", "0 0 1 * *", "not a schedule", "61 * * * *"}
	// Around the 2026 DST change in Berlin, at odd seconds and exact minutes.
	start := time.Date(2026, 3, 28, 23, 58, 0, 0, time.UTC)
	for i := 0; i < 3000; i++ {
		now := start.Add(time.Duration(i) * 37 * time.Second / 2)
		for _, s := range schedules {
			if got, want := ScheduleInterval(s, now), direct(s, now); got != want {
				t.Fatalf("ScheduleInterval(%q, %s) = %s, want %s", s, now, got, want)
			}
		}
	}
	if ScheduleInterval("", start) != 0 {
		t.Fatal("empty schedule has an interval")
	}
}
