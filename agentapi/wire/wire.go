// Package wire holds the request and response bodies of the agent API
// (/agent/v1), shared by the agent (package agent, which runs on customers'
// machines) and the appliance's handler (package agentapi). It imports
// nothing of the appliance, so the agent never links the domain or storage.
//
// Compatibility: agents in the field are older or newer than the appliance.
// Fields are only ever added; a receiver ignores fields it does not know and
// treats a missing field as its zero value.
package wire

import "time"

// Header names and fixed values of the agent protocol.
const (
	// AuthScheme: every call but enroll sends "Authorization: Endpoint <id>:<secret>".
	// Basic auth with the same pair is accepted too, like the repository server.
	AuthScheme = "Endpoint"
	// Prefix is where the agent API is mounted.
	Prefix = "/agent/v1"
)

// Run kinds, triggers and final states.
const (
	KindBackup  = "backup"
	KindRestore = "restore"

	TriggerSchedule = "schedule" // the agent's own schedule
	TriggerCommand  = "command"  // a command from the appliance (API or web)
	TriggerManual   = "manual"   // `backstop agent backup` on the machine

	StateSucceeded   = "succeeded"
	StatePartial     = "partial" // snapshot made, some files unreadable (restic exit 3)
	StateFailed      = "failed"
	StateInterrupted = "interrupted" // SIGTERM/agent restart: not a failure (SPEC rule 3)
)

// EnrollRequest is POST /agent/v1/enroll.
type EnrollRequest struct {
	Token        string   `json:"token"`
	Hostname     string   `json:"hostname"`
	OS           string   `json:"os"`
	Arch         string   `json:"arch"`
	Profile      string   `json:"profile,omitempty"` // "" keeps the token's profile
	AgentVersion string   `json:"agentVersion"`
	Paths        []string `json:"paths,omitempty"` // initial backup paths; "" keeps the endpoint's
}

// Repository is where and how the endpoint's restic repository is reached.
type Repository struct {
	URL      string `json:"url"` // rest:https://…/agent/restic/<id>/ (credentials not included)
	Password string `json:"password"`
}

// Config is what the agent runs: GET /agent/v1/config and part of enroll.
type Config struct {
	EndpointID  string   `json:"endpointId"`
	DisplayName string   `json:"displayName"`
	Profile     string   `json:"profile"`
	Schedule    string   `json:"schedule"` // cron expression (5 fields or @daily); "" = on demand only
	Paths       []string `json:"paths"`
	Excludes    []string `json:"excludes"`
	// HeartbeatSeconds is how often the agent calls heartbeat (default 60).
	HeartbeatSeconds int `json:"heartbeatSeconds"`
	// ProgressSeconds is the longest gap between progress reports of a run (default 2).
	ProgressSeconds int `json:"progressSeconds"`
	// SampleFiles is how many files a backup samples with their SHA-256 (default 20).
	SampleFiles int `json:"sampleFiles"`
}

// EnrollResponse answers enroll. The secret is shown once.
type EnrollResponse struct {
	EndpointID string     `json:"endpointId"`
	Secret     string     `json:"secret"`
	Repository Repository `json:"repository"`
	Config     Config     `json:"config"`
}

// HeartbeatRequest is POST /agent/v1/heartbeat.
type HeartbeatRequest struct {
	Hostname      string `json:"hostname"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	AgentVersion  string `json:"agentVersion"`
	ResticVersion string `json:"resticVersion,omitempty"`
	// RunningCommandIDs are commands the agent has accepted and not yet
	// reported, so the appliance does not hand them out again.
	RunningCommandIDs []string `json:"runningCommandIds,omitempty"`
}

// HeartbeatResponse carries the commands waiting for the endpoint.
type HeartbeatResponse struct {
	Commands []Command `json:"commands"`
	// ConfigVersion changes whenever the config does, so the agent
	// refetches it only then.
	ConfigVersion string `json:"configVersion"`
}

// Command is a backup or restore the appliance asks for.
type Command struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // backup, restore
	// Restore only: the snapshot ("latest" or an id), the paths inside it
	// (empty = everything), and the target directory ("" = original paths).
	SnapshotID string   `json:"snapshotId,omitempty"`
	Include    []string `json:"include,omitempty"`
	Target     string   `json:"target,omitempty"`
}

// RunStart registers a run: POST /agent/v1/runs. The agent chooses the run id
// so that a run made while the appliance was unreachable can be reported
// later; registering the same id twice is harmless.
type RunStart struct {
	RunID     string    `json:"runId"` // run_ + 32 hex characters
	Kind      string    `json:"kind"`
	Trigger   string    `json:"trigger"`
	CommandID string    `json:"commandId,omitempty"`
	StartedAt time.Time `json:"startedAt"`
}

// RunStarted answers RunStart.
type RunStarted struct {
	RunID string `json:"runId"`
	JobID string `json:"jobId"`
}

// Progress is POST /agent/v1/runs/{id}/progress.
type Progress struct {
	Phase      string  `json:"phase"` // scanning, uploading, finalizing, restoring
	Percent    float64 `json:"percent"`
	FilesDone  int64   `json:"filesDone"`
	FilesTotal int64   `json:"filesTotal"`
	BytesDone  int64   `json:"bytesDone"`
	BytesTotal int64   `json:"bytesTotal"`
}

// Stats summarise a finished backup (restic's summary message).
type Stats struct {
	FilesNew        int64   `json:"filesNew"`
	FilesChanged    int64   `json:"filesChanged"`
	FilesUnmodified int64   `json:"filesUnmodified"`
	DirsNew         int64   `json:"dirsNew"`
	DataAdded       int64   `json:"dataAdded"`
	FilesProcessed  int64   `json:"filesProcessed"`
	BytesProcessed  int64   `json:"bytesProcessed"`
	ErrorCount      int64   `json:"errorCount"` // files restic could not read
	DurationSeconds float64 `json:"durationSeconds"`
}

// SampledFile is one file of a snapshot with its content hash, taken only
// from files whose size and modification time did not change during the
// run, so a later restore test can compare.
type SampledFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Failure is why a run failed, as the agent classified it.
type Failure struct {
	Code     string            `json:"code"` // agent.tool_missing, restic.wrong_password, …
	Message  string            `json:"message"`
	ExitCode int               `json:"exitCode,omitempty"`
	Step     string            `json:"step,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
	Details  string            `json:"details,omitempty"` // last lines of restic's stderr
}

// Finish is POST /agent/v1/runs/{id}/finish. It repeats the RunStart so that
// a run the appliance never heard of (made offline, spooled) is recorded
// whole. Finishing a run twice is harmless: the appliance keeps the first.
type Finish struct {
	Run        RunStart      `json:"run"`
	State      string        `json:"state"`
	FinishedAt time.Time     `json:"finishedAt"`
	SnapshotID string        `json:"snapshotId,omitempty"` // full 64-character id
	Stats      *Stats        `json:"stats,omitempty"`
	Sampled    []SampledFile `json:"sampled,omitempty"`
	Failure    *Failure      `json:"failure,omitempty"`
}

// FinishResult answers Finish.
type FinishResult struct {
	JobID     string `json:"jobId"`
	Duplicate bool   `json:"duplicate"` // this run had already been finished
}

// Update is GET /agent/v1/update's answer when the appliance offers this
// endpoint's agent another build (204 No Content when it does not). URL is
// the path of the binary under the appliance (/install/bin/<file>); SHA256
// is its hex SHA-256, also listed in /install/SHA256SUMS.
type Update struct {
	Version   string `json:"version"`
	Available bool   `json:"available"` // always true in a 200 answer
	URL       string `json:"url"`
	SHA256    string `json:"sha256"`
}

// Query parameters of GET /agent/v1/update; each defaults to what the
// endpoint last reported in a heartbeat.
const (
	UpdateQueryOS      = "os"
	UpdateQueryArch    = "arch"
	UpdateQueryVersion = "agentVersion"
)

// Error is the body of every refusal (problem+json subset).
type Error struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}
