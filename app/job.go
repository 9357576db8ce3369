package app

import (
	"context"
	"time"
)

// Job states.
const (
	JobQueued      = "queued"
	JobRunning     = "running"
	JobSucceeded   = "succeeded"
	JobPartial     = "partial"
	JobFailed      = "failed"
	JobInterrupted = "interrupted"
	JobCancelled   = "cancelled"
)

// JobCounts is the `jobs` object of the status response.
type JobCounts struct {
	Running      int `json:"running"`
	Queued       int `json:"queued"`
	Failed24h    int `json:"failed24h"`
	Succeeded24h int `json:"succeeded24h"`
}

// JobCounter counts jobs for the status summary.
type JobCounter interface {
	// CountJobs counts running and queued jobs now and those that finished
	// since the given time, for one tenant ("" for all).
	CountJobs(ctx context.Context, tenantID string, since time.Time) (JobCounts, error)
}
