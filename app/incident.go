package app

import "time"

// Incident states on the wire.
const (
	IncidentOpen     = "open"
	IncidentResolved = "resolved"
)

// Incident is data.incident of job.failed and job.completed (CONTRACT §15):
// one problem of one target, so a PSA opens one ticket per problem and
// closes it by itself. Key is "<targetId>:<failure.code>" and stays the
// same on every failure of that target with that cause.
type Incident struct {
	Key      string `json:"key" doc:"<targetId>:<failure.code>; stable for one target and cause."`
	State    string `json:"state" enum:"open,resolved"`
	OpenedAt Time   `json:"openedAt" doc:"End of the first failed job of this incident."`
	// Replaces is set when a failure with another cause ends the incident
	// that was open for the same target and job kind: that one is over and
	// this one takes its place.
	Replaces *IncidentRef `json:"replaces,omitempty"`
}

// IncidentRef names an earlier incident.
type IncidentRef struct {
	Key      string `json:"key"`
	OpenedAt Time   `json:"openedAt"`
}

// OpenIncident is the incident currently open for one target and job kind
// (queue), as kept between job ends. A target has at most one per queue:
// a verify run's success does not close its backup's failure.
type OpenIncident struct {
	TenantID   string
	TargetType string
	TargetID   string
	Queue      string
	Key        string
	OpenedAt   time.Time
}

// IncidentKey is the key of the incident a failure of the target opens.
func IncidentKey(targetID, failureCode string) string { return targetID + ":" + failureCode }

// NextIncident applies the end of j (failed, succeeded or partial) to the
// incident open for its target and kind (nil when none) and returns what the
// event carries (nil: no incident) and what stays open afterwards (nil:
// nothing). A failure opens the incident of its cause, or continues it when
// it is the one already open; a success or partial closes the open incident
// and carries it as resolved; a success with none open carries nothing.
// Any other state changes nothing.
func NextIncident(j *Job, open *OpenIncident, at time.Time) (carried *Incident, next *OpenIncident) {
	switch j.State {
	case JobFailed:
		code := CodeUnknown
		if j.Failure != nil && j.Failure.Code != "" {
			code = j.Failure.Code
		}
		key := IncidentKey(j.Target.ID, code)
		if open != nil && open.Key == key {
			return &Incident{Key: key, State: IncidentOpen, OpenedAt: At(open.OpenedAt)}, open
		}
		next = &OpenIncident{TenantID: j.TenantID, TargetType: j.Target.Type, TargetID: j.Target.ID, Queue: j.Queue,
			Key: key, OpenedAt: at}
		carried = &Incident{Key: key, State: IncidentOpen, OpenedAt: At(at)}
		if open != nil {
			carried.Replaces = &IncidentRef{Key: open.Key, OpenedAt: At(open.OpenedAt)}
		}
		return carried, next
	case JobSucceeded, JobPartial:
		if open == nil {
			return nil, nil
		}
		return &Incident{Key: open.Key, State: IncidentResolved, OpenedAt: At(open.OpenedAt)}, nil
	default:
		return nil, open
	}
}
