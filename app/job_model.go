package app

import (
	"context"
	"encoding/json"
	"time"
)

// Job queues (CONTRACT §4). Each queue has its own bounded worker pool.
const (
	QueueMailboxBackup   = "mailbox_backup"
	QueueDriveBackup     = "drive_backup"
	QueueIMAPBackup      = "imap_backup"
	QueueEndpointBackup  = "endpoint_backup"
	QueueEndpointRestore = "endpoint_restore"
	QueueRestore         = "restore"
	QueueVerify          = "verify"
	QueueArchiveVerify   = "archive_verify"
	QueueDirectorySync   = "directory_sync"
	QueueRetention       = "retention"
	QueueMaintenance     = "maintenance"
)

// JobQueues lists every queue.
var JobQueues = []string{QueueMailboxBackup, QueueDriveBackup, QueueIMAPBackup, QueueEndpointBackup,
	QueueEndpointRestore, QueueRestore, QueueVerify, QueueArchiveVerify, QueueDirectorySync, QueueRetention, QueueMaintenance}

// Job triggers: what started a job.
const (
	TriggerSchedule = "schedule"
	TriggerAPI      = "api"
	TriggerWeb      = "web"
	TriggerRetry    = "retry" // an automatic retry or the re-run of an interrupted job
)

// Job actions: what a request asks for; a job kind serves one action for one
// target type.
const (
	ActionBackup  = "backup"
	ActionRestore = "restore"
	ActionVerify  = "verify"
	// ActionRetention applies a tenant's retention policy (CONTRACT §11).
	ActionRetention = "retention"
	// ActionSync reads a Microsoft 365 source's directory (CONTRACT §13).
	ActionSync = "sync"
)

// Job executors: who runs the job.
const (
	ExecutorLocal    = "local"    // a function in this process, claimed by the runner's pool
	ExecutorExternal = "external" // another process (the agent) claims it and reports
)

// JobTerminal reports whether state is final.
func JobTerminal(state string) bool {
	switch state {
	case JobSucceeded, JobPartial, JobFailed, JobInterrupted, JobCancelled:
		return true
	}
	return false
}

// Job is one unit of work as the API shows it (CONTRACT §4), plus the
// runner's bookkeeping, which stays off the wire.
type Job struct {
	ID           string      `json:"id"`
	TenantID     string      `json:"tenantId"`
	Queue        string      `json:"queue" enum:"mailbox_backup,drive_backup,imap_backup,endpoint_backup,endpoint_restore,restore,verify,archive_verify,directory_sync,retention,maintenance"`
	State        string      `json:"state" enum:"queued,running,succeeded,partial,failed,interrupted,cancelled"`
	Target       JobTarget   `json:"target"`
	Trigger      string      `json:"trigger" enum:"schedule,api,web,retry"`
	Progress     JobProgress `json:"progress"`
	QueuedAt     Time        `json:"queuedAt"`
	StartedAt    *Time       `json:"startedAt"`
	FinishedAt   *Time       `json:"finishedAt"`
	DurationMs   *int64      `json:"durationMs" doc:"finishedAt - startedAt; null until the job finished."`
	SnapshotID   *string     `json:"snapshotId" doc:"The snapshot the job produced or used; null when none."`
	ItemsFailed  int         `json:"itemsFailed"`
	ErrorMessage *string     `json:"errorMessage" doc:"One line for people; null when the job did not fail."`
	Failure      *Failure    `json:"failure" doc:"Why the job failed; null for a job that did not fail."`
	ItemCauses   []ItemCause `json:"itemCauses" doc:"Causes of the failed items, most frequent first, at most 3."`

	Action      string          `json:"-"`
	Executor    string          `json:"-"`
	Params      json.RawMessage `json:"-"` // kind-specific request parameters
	Attempt     int             `json:"-"` // from 1; a retry job has the failed one's attempt + 1
	MaxAttempts int             `json:"-"`
	NotBefore   *time.Time      `json:"-"` // a queued job is not claimed before this
	RetryOf     string          `json:"-"` // the failed or interrupted job this one re-runs
}

// JobTarget is what a job works on.
type JobTarget struct {
	Type        string `json:"type" doc:"endpoint, protected_object, snapshot, archive, …"`
	ID          string `json:"id"`
	DisplayName string `json:"displayName"`
}

// JobProgress is how far a job got. Totals are 0 while unknown.
type JobProgress struct {
	Phase      string `json:"phase" doc:"queued, starting, scanning, transferring, verifying, finishing, done."`
	Percent    int    `json:"percent" minimum:"0" maximum:"100"`
	ItemsDone  int64  `json:"itemsDone"`
	ItemsTotal int64  `json:"itemsTotal"`
	BytesDone  int64  `json:"bytesDone"`
	BytesTotal int64  `json:"bytesTotal"`
}

// JobItem is one item of a job that failed (a file, a message, a folder).
type JobItem struct {
	Ref     string   `json:"ref" doc:"The item's identity in its source: path, message id, folder."`
	Name    string   `json:"name" doc:"Readable name."`
	State   string   `json:"state" enum:"failed"`
	At      Time     `json:"at"`
	Failure *Failure `json:"failure"`
}

// FailureGroup counts a job's failed items with one cause.
type FailureGroup struct {
	Code   string `json:"code"`
	Count  int    `json:"count"`
	Sample string `json:"sample" doc:"Name of one failed item with this cause."`
}

// JobDetail is the job with its failed items and their grouping.
type JobDetail struct {
	*Job
	Items         []*JobItem     `json:"items" doc:"Failed items, first 1000."`
	FailureGroups []FailureGroup `json:"failureGroups"`
}

// JobFilter selects jobs, newest first.
type JobFilter struct {
	TenantID string // "" for all
	State    string
	Queue    string
	TargetID string     // only jobs on this target (an endpoint, a protected object, …)
	Since    *time.Time // queued at or after
	Before   *JobCursor // cursor: jobs after this one in newest-first order
	Limit    int
}

// JobCursor is a position in the newest-first job list: jobs queued
// earlier, or at the same millisecond with a smaller id, come after it.
type JobCursor struct {
	QueuedAt time.Time
	ID       string
}

// JobFinisher decides a running job's end inside the store's transaction:
// it sets the final fields on j and returns what must commit with them.
type JobFinisher func(j *Job) (*JobFollowUp, error)

// JobFollowUp is what commits together with a job's final state: the
// retry or re-run job to queue, and the webhook events it raises.
type JobFollowUp struct {
	Next   *Job
	Events []*Event
}

// JobService stores jobs and their items. Every state change of a job is one
// write transaction.
type JobService interface {
	JobCounter
	CreateJob(ctx context.Context, j *Job) error
	// Job returns the job with the id, or a not-found error.
	Job(ctx context.Context, id string) (*Job, error)
	Jobs(ctx context.Context, f JobFilter) ([]*Job, error)
	// JobItems returns up to limit failed items of a job, in report order.
	JobItems(ctx context.Context, jobID string, limit int) ([]*JobItem, error)
	// FailureGroups groups a job's failed items by code, most frequent first.
	FailureGroups(ctx context.Context, jobID string) ([]FailureGroup, error)
	// ClaimJobs moves up to limit due, queued, local jobs of the queue to
	// running (oldest first) and returns them.
	ClaimJobs(ctx context.Context, queue string, limit int, now time.Time) ([]*Job, error)
	// StartJob moves one queued job to running (an external executor took
	// it); a job in any other state is a conflict.
	StartJob(ctx context.Context, id string, now time.Time) (*Job, error)
	// SaveJobProgress stores the progress of a running job.
	SaveJobProgress(ctx context.Context, id string, p JobProgress) error
	// AddJobItem records a failed item and bumps the job's itemsFailed.
	AddJobItem(ctx context.Context, jobID string, it *JobItem) (*Job, error)
	// FinishJob reads the running job, lets fn set its end, and commits the
	// job, fn's follow-up job and events in one transaction. A job that is
	// not running is a conflict.
	FinishJob(ctx context.Context, id string, fn JobFinisher) (*Job, error)
	// RunningJobs lists running jobs of an executor (recovery after a crash).
	RunningJobs(ctx context.Context, executor string) ([]*Job, error)
	// NextJobDueAt is the earliest notBefore among queued local jobs that are
	// not yet due, or nil.
	NextJobDueAt(ctx context.Context, now time.Time) (*time.Time, error)
	// ActiveJobFor returns a queued or running job of the action on the
	// target, or a not-found error (schedules do not pile up).
	ActiveJobFor(ctx context.Context, action, targetType, targetID string) (*Job, error)
}

// JobRequest asks for work on a target: POST /backups, /restores, /verifies,
// a schedule, or the web interface.
type JobRequest struct {
	TenantID   string
	Action     string
	TargetType string // "" for restores: the snapshot names its owner
	TargetID   string
	Trigger    string
	Params     json.RawMessage
}

// JobSubmitter starts jobs. An action on a target type no job kind serves is
// a validation error naming body.targetType (body.snapshotId for restores);
// a target the tenant cannot see is not found.
type JobSubmitter interface {
	Submit(ctx context.Context, req JobRequest) (*Job, error)
}

// Job stream event types (CONTRACT §6).
const (
	StreamSnapshot = "snapshot"
	StreamProgress = "progress"
	StreamState    = "state"
	StreamEnd      = "end"
)

// JobStreamEvent is one server-sent event of a job's progress stream. Data is
// the encoded JSON payload, shared by every subscriber.
type JobStreamEvent struct {
	ID   int64
	Type string
	Data []byte
}

// JobStream is one subscriber's position in a job's event stream. It never
// blocks the publisher: a subscriber that falls behind the kept history gets
// a fresh snapshot instead of the events it missed.
type JobStream interface {
	// Ready is signalled when Take may return events.
	Ready() <-chan struct{}
	// Take returns the pending events in order; done is true once the end
	// event was returned (the stream has nothing more).
	Take() (events []JobStreamEvent, done bool)
	// Close releases the subscription.
	Close()
}

// JobFeed fans out job progress in process.
type JobFeed interface {
	// Follow subscribes to job (as just read from the store). With
	// lastEventID > 0 it resumes after that event when it still can, else it
	// starts with a fresh snapshot. ended reports that the client already had
	// the end event: there is nothing to send.
	Follow(job *Job, lastEventID int64) (stream JobStream, ended bool)
}
