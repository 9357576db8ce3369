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

// JobQueueCount is how many jobs of one queue are in one state.
type JobQueueCount struct {
	Queue string
	State string
	Count int
}

// ActiveJobCounter counts unfinished jobs for the metrics scrape.
type ActiveJobCounter interface {
	// CountActiveJobs counts queued and running jobs of every tenant by
	// queue and state; pairs with no job are left out. It reads only the
	// unfinished jobs, so its cost does not grow with the job history.
	CountActiveJobs(ctx context.Context) ([]JobQueueCount, error)
}

// JobCounter counts jobs for the status summary.
type JobCounter interface {
	// CountJobs counts running and queued jobs now and those that finished
	// since the given time, for one tenant ("" for all).
	CountJobs(ctx context.Context, tenantID string, since time.Time) (JobCounts, error)
}
