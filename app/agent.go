package app

import (
	"context"
	"encoding/json"
	"time"
)

// TargetEndpoint is the job target type of agent runs.
const TargetEndpoint = "endpoint"

// AgentCommand is a backup or restore the appliance asks an endpoint to
// run: a queued job with an external executor whose target is the
// endpoint. Its id is the job's id. It is handed out with every heartbeat
// until a run claims it, so a lost heartbeat answer loses nothing.
type AgentCommand struct {
	ID         string // the job id
	EndpointID string
	Kind       string // ActionBackup or ActionRestore
	Restore    RestoreParams
}

// RestoreParams say what an endpoint restore brings back and where: the
// job params of an endpoint_restore job, named like POST /restores' body.
type RestoreParams struct {
	SnapshotID  string   `json:"snapshotId"`            // full id, or "latest"
	Items       []string `json:"items,omitempty"`       // paths inside the snapshot; empty = all
	Destination string   `json:"destination,omitempty"` // directory on the machine; "" = original paths
}

// AgentRun is one backup or restore an agent reported.
type AgentRun struct {
	ID         string // chosen by the agent: run_…
	EndpointID string
	JobID      string
	Kind       string // ActionBackup or ActionRestore
	CommandID  string
	StartedAt  time.Time
	FinishedAt *time.Time
	State      string // running, then the job's final state
	SnapshotID string
	Stats      json.RawMessage
	Sampled    []SampledFile
}

// SampledFile is a file of a snapshot with its content hash, for restore
// tests: restoring it must give the same SHA-256.
type SampledFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// AgentRunEnd is what an agent reports at the end of a run.
type AgentRunEnd struct {
	RunID      string
	EndpointID string
	State      string // JobSucceeded, JobPartial, JobFailed or JobInterrupted
	FinishedAt time.Time
	SnapshotID string
	Stats      json.RawMessage
	Sampled    []SampledFile
	Failure    *Failure // JobFailed only
	// Message is the job's one-line errorMessage (failed runs).
	Message string
}

// EndpointEventData is data.endpoint of job.failed and job.completed for
// endpoint runs (CONTRACT §5).
type EndpointEventData struct {
	ID          string `json:"id"`
	Hostname    string `json:"hostname"`
	DisplayName string `json:"displayName"`
	Profile     string `json:"profile"`
	OS          string `json:"os"`
}

// EndpointEvent builds data.endpoint for e.
func EndpointEvent(e *Endpoint) EndpointEventData {
	d := EndpointEventData{ID: e.ID, Hostname: e.Hostname, DisplayName: e.DisplayName, Profile: e.Profile, OS: e.OS}
	if d.DisplayName == "" {
		d.DisplayName = e.Hostname
	}
	return d
}

// AgentService stores the agent protocol's commands and runs.
type AgentService interface {
	// PendingAgentCommands returns the endpoint's queued external jobs that
	// are due at now, oldest first.
	PendingAgentCommands(ctx context.Context, endpointID string, now time.Time) ([]*AgentCommand, error)
	// StartAgentRun registers a run. Registering a known run id returns the
	// stored run (the agent retried). A run naming a command (a queued job
	// of the endpoint) moves that job to running; any other run gets newJob,
	// stored as running. A run naming another endpoint's job is not found;
	// one naming a job no longer queued is a conflict.
	StartAgentRun(ctx context.Context, r *AgentRun, newJob *Job) (*AgentRun, error)
	// AgentRun returns the run with the id, or a not-found error.
	AgentRun(ctx context.Context, id string) (*AgentRun, error)
	// FinishAgentRun ends a running run in one transaction: its job (final
	// state, snapshot, failure), the endpoint's facts (lastBackupAt,
	// lastBackupState, lastSuccessAt, lastSnapshotId for backups), and the
	// events that events(job, endpoint) returns. A run that already ended is
	// left as it is and reported with duplicate = true.
	FinishAgentRun(ctx context.Context, end AgentRunEnd, events func(*Job, *Endpoint) []*Event) (job *Job, duplicate bool, err error)
	// SnapshotSamples returns the files sampled by the backup that made the
	// snapshot, and its endpoint: the seam for restore tests.
	SnapshotSamples(ctx context.Context, snapshotID string) (endpointID string, files []SampledFile, err error)
}

// EndpointJobEvents returns the webhook events of an endpoint run's end:
// job.completed (succeeded, partial) or job.failed, each with data.job and
// data.endpoint. An interrupted run raises none (SPEC rule 10).
func EndpointJobEvents(j *Job, e *Endpoint) []*Event {
	var typ string
	switch j.State {
	case JobSucceeded, JobPartial:
		typ = EventJobCompleted
	case JobFailed:
		typ = EventJobFailed
	default:
		return nil
	}
	return []*Event{{Type: typ, TenantID: j.TenantID, Data: map[string]any{"job": j, "endpoint": EndpointEvent(e)}}}
}
