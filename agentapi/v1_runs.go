package agentapi

import (
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"time"

	"backstop/agentapi/wire"
	"backstop/app"
)

var runIDPattern = regexp.MustCompile(`^run_[0-9a-f]{32}$`)
var snapshotIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// queueOf maps a run kind to its job queue and action.
func queueOf(kind string) (queue, action string, ok bool) {
	switch kind {
	case wire.KindBackup:
		return app.QueueEndpointBackup, app.ActionBackup, true
	case wire.KindRestore:
		return app.QueueEndpointRestore, app.ActionRestore, true
	}
	return "", "", false
}

// jobTrigger maps the agent's trigger to the job's: the agent's own
// schedule is "schedule"; a command keeps the trigger of the job queued for
// it; a run started by hand on the machine counts as "api" (an explicit
// request outside the schedule).
func jobTrigger(t string) string {
	if t == wire.TriggerSchedule {
		return app.TriggerSchedule
	}
	return app.TriggerAPI
}

// register stores a run start (idempotent by run id).
func (h *Handler) register(r *http.Request, e *app.Endpoint, in wire.RunStart) (*app.AgentRun, int, string) {
	if !runIDPattern.MatchString(in.RunID) {
		return nil, http.StatusUnprocessableEntity, "runId must be run_ followed by 32 lowercase hex digits"
	}
	queue, action, ok := queueOf(in.Kind)
	if !ok {
		return nil, http.StatusUnprocessableEntity, "kind must be backup or restore"
	}
	started := in.StartedAt
	if started.IsZero() || started.After(h.opts.Now().Add(time.Hour)) {
		started = h.opts.Now()
	}
	name := e.DisplayName
	if name == "" {
		name = e.Hostname
	}
	job := &app.Job{TenantID: e.TenantID, Queue: queue, Action: action, Trigger: jobTrigger(in.Trigger),
		Target:   app.JobTarget{Type: app.TargetEndpoint, ID: e.ID, DisplayName: name},
		Progress: app.JobProgress{Phase: "starting"}, QueuedAt: app.At(started)}
	run, err := h.svc.Agents.StartAgentRun(r.Context(), &app.AgentRun{ID: in.RunID, EndpointID: e.ID, Kind: action,
		CommandID: in.CommandID, StartedAt: started}, job)
	if err != nil {
		switch app.ErrorCode(err) {
		case app.ENOTFOUND:
			return nil, http.StatusNotFound, "no such command for this endpoint"
		case app.ECONFLICT:
			return nil, http.StatusConflict, app.ErrorMessage(err)
		}
		return nil, 0, err.Error()
	}
	return run, 0, ""
}

// startRun answers POST /agent/v1/runs.
func (h *Handler) startRun(w http.ResponseWriter, r *http.Request, e *app.Endpoint) {
	var in wire.RunStart
	if !readJSON(w, r, &in) {
		return
	}
	run, status, msg := h.register(r, e, in)
	if run == nil {
		if status == 0 {
			h.internal(w, "start run", errString(msg))
			return
		}
		writeError(w, status, codeFor(status), msg)
		return
	}
	h.publish(r.Context(), run.JobID)
	writeJSON(w, http.StatusOK, wire.RunStarted{RunID: run.ID, JobID: run.JobID})
}

// progress answers POST /agent/v1/runs/{id}/progress. A report for a run
// that already ended changes nothing.
func (h *Handler) progress(w http.ResponseWriter, r *http.Request, e *app.Endpoint) {
	var in wire.Progress
	if !readJSON(w, r, &in) {
		return
	}
	run, err := h.svc.Agents.AgentRun(r.Context(), r.PathValue("id"))
	if err != nil || run.EndpointID != e.ID {
		writeError(w, http.StatusNotFound, app.ENOTFOUND, "no such run for this endpoint")
		return
	}
	p := app.JobProgress{Phase: in.Phase, Percent: int(math.Round(min(max(in.Percent, 0), 100))),
		ItemsDone: in.FilesDone, ItemsTotal: in.FilesTotal, BytesDone: in.BytesDone, BytesTotal: in.BytesTotal}
	if p.Phase == "" {
		p.Phase = "transferring"
	}
	if err := h.svc.Jobs.SaveJobProgress(r.Context(), run.JobID, p); err != nil {
		h.internal(w, "progress", err)
		return
	}
	h.publish(r.Context(), run.JobID)
	w.WriteHeader(http.StatusNoContent)
}

// finish answers POST /agent/v1/runs/{id}/finish. The report repeats the
// run's start, so a run the appliance never heard of (made while it was
// unreachable) is registered first. A second report of the same run is
// answered 200 with duplicate = true and changes nothing.
func (h *Handler) finish(w http.ResponseWriter, r *http.Request, e *app.Endpoint) {
	var in wire.Finish
	if !readJSON(w, r, &in) {
		return
	}
	if in.Run.RunID == "" {
		in.Run.RunID = r.PathValue("id")
	}
	if in.Run.RunID != r.PathValue("id") {
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, "run.runId differs from the run in the path")
		return
	}
	end, msg := h.runEnd(e, in)
	if msg != "" {
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, msg)
		return
	}
	if run, status, msg := h.register(r, e, in.Run); run == nil {
		if status == 0 {
			h.internal(w, "register run", errString(msg))
		} else {
			writeError(w, status, codeFor(status), msg)
		}
		return
	}
	job, dup, err := h.svc.Agents.FinishAgentRun(r.Context(), end, app.EndpointJobEvents)
	if err != nil {
		h.appError(w, "finish run", err)
		return
	}
	if !dup && h.opts.JobChanged != nil {
		h.opts.JobChanged(job)
	}
	if !dup && h.opts.JobEnded != nil {
		h.opts.JobEnded(job)
	}
	writeJSON(w, http.StatusOK, wire.FinishResult{JobID: job.ID, Duplicate: dup})
}

// runEnd validates a finish report and converts it; msg names what is wrong.
func (h *Handler) runEnd(e *app.Endpoint, in wire.Finish) (end app.AgentRunEnd, msg string) {
	end = app.AgentRunEnd{RunID: in.Run.RunID, EndpointID: e.ID, FinishedAt: in.FinishedAt, SnapshotID: in.SnapshotID}
	now := h.opts.Now()
	if end.FinishedAt.IsZero() || end.FinishedAt.After(now.Add(time.Hour)) {
		end.FinishedAt = now
	}
	if in.SnapshotID != "" && !snapshotIDPattern.MatchString(in.SnapshotID) {
		return end, "snapshotId must be the full 64-character snapshot id"
	}
	switch in.State {
	case wire.StateSucceeded, wire.StatePartial:
		if in.Run.Kind == wire.KindBackup && in.SnapshotID == "" {
			return end, "a successful backup must report its snapshotId"
		}
		end.State = in.State
	case wire.StateInterrupted:
		end.State = app.JobInterrupted
	case wire.StateFailed:
		end.State = app.JobFailed
		f := in.Failure
		if f == nil {
			f = &wire.Failure{Code: app.CodeUnknown, Message: "the agent reported a failure without a cause"}
		}
		params := map[string]any{"hostname": e.Hostname}
		for k, v := range f.Params {
			params[k] = v
		}
		details := f.Message
		if f.Details != "" {
			details += "\n" + f.Details
		}
		end.Failure = app.NewFailure(f.Code, params, details, f.Step, end.FinishedAt)
		end.Message = clip(f.Message, 500)
	default:
		return end, "state must be succeeded, partial, failed or interrupted"
	}
	if in.Stats != nil {
		end.Stats, _ = json.Marshal(in.Stats)
	}
	if len(in.Sampled) > 1000 {
		return end, "at most 1000 sampled files"
	}
	for _, s := range in.Sampled {
		if s.Path == "" || len(s.SHA256) != 64 || s.Size < 0 {
			return end, "each sampled file needs path, size and a 64-character sha256"
		}
		end.Sampled = append(end.Sampled, app.SampledFile{Path: s.Path, Size: s.Size, SHA256: s.SHA256})
	}
	return end, ""
}

type errString string

func (e errString) Error() string { return string(e) }

func codeFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return app.ENOTFOUND
	case http.StatusConflict:
		return app.ECONFLICT
	case http.StatusUnprocessableEntity:
		return app.EINVALID
	}
	return "bad_request"
}
