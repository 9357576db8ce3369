package app

import (
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Listing endpoints derives `overdue` from each endpoint's cron schedule;
// parsing the expression and finding two firings for 10,000 endpoints took
// most of the time of GET /api/v1/endpoints. The interval of a cron schedule
// (second field fixed at 0, minute resolution) is the same for every instant
// within one minute, so it is memoized per schedule and minute. Endpoints
// share a handful of schedules; the cache is bounded all the same.

type scheduleEntry struct {
	spec     cron.Schedule // nil: the expression does not parse
	minute   int64         // Unix minute the interval was computed for
	interval time.Duration
}

var scheduleCache = struct {
	sync.Mutex
	m map[string]*scheduleEntry
}{m: map[string]*scheduleEntry{}}

const scheduleCacheMax = 1024

// cachedScheduleInterval is ScheduleInterval's memoized computation for a
// non-empty schedule.
func cachedScheduleInterval(schedule string, now time.Time) time.Duration {
	minute := now.Unix() / 60
	if now.Unix() < 0 && now.Unix()%60 != 0 {
		minute-- // floor, not truncation, before 1970
	}
	scheduleCache.Lock()
	defer scheduleCache.Unlock()
	e := scheduleCache.m[schedule]
	if e == nil {
		if len(scheduleCache.m) >= scheduleCacheMax {
			clear(scheduleCache.m)
		}
		e = &scheduleEntry{minute: minute - 1} // forces the computation below
		if s, err := cron.ParseStandard(schedule); err == nil {
			e.spec = s
		}
		scheduleCache.m[schedule] = e
	}
	if e.spec == nil {
		return 0
	}
	if e.minute != minute {
		next := e.spec.Next(now)
		e.minute, e.interval = minute, e.spec.Next(next).Sub(next)
	}
	return e.interval
}
