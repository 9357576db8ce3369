package app

import (
	"context"
	"encoding/json"
	"time"
)

// PrefixSchedule is the id prefix of job schedules.
const PrefixSchedule = "sch_"

// JobSchedule starts a job of an action on a target whenever its cron
// expression fires (standard 5 fields, or descriptors such as @every 1h,
// evaluated in UTC). A schedule never piles up work: when the previous job
// on the target is still queued or running, the firing is skipped.
type JobSchedule struct {
	ID         string
	TenantID   string
	Action     string
	TargetType string
	TargetID   string
	Spec       string
	Params     json.RawMessage
	Enabled    bool
	CreatedAt  time.Time
}

// JobScheduleService stores schedules.
type JobScheduleService interface {
	// SaveJobSchedule creates the schedule or replaces the one for the same
	// action and target.
	SaveJobSchedule(ctx context.Context, s *JobSchedule) error
	JobSchedules(ctx context.Context) ([]*JobSchedule, error)
	// JobScheduleSpecs lists the distinct cron expressions of the enabled
	// schedules, and EnabledJobSchedules the enabled schedules with one of
	// them, in id order: the runner's cron holds only the expressions and
	// reads a firing's schedules when it fires.
	JobScheduleSpecs(ctx context.Context) ([]string, error)
	EnabledJobSchedules(ctx context.Context, spec string) ([]*JobSchedule, error)
	DeleteJobSchedule(ctx context.Context, id string) error
}
