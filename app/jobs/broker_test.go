package jobs_test

import (
	"encoding/json"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
)

func testJob(state string, percent int) *app.Job {
	return &app.Job{ID: "job_1", TenantID: "tn_a", Queue: app.QueueIMAPBackup, State: state,
		Progress: app.JobProgress{Phase: "transferring", Percent: percent}, ItemCauses: []app.ItemCause{}}
}

func take(t *testing.T, s app.JobStream) ([]app.JobStreamEvent, bool) {
	t.Helper()
	select {
	case <-s.Ready():
	case <-time.After(time.Second):
		t.Fatal("stream not signalled")
	}
	return s.Take()
}

func types(evs []app.JobStreamEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func increasing(t *testing.T, evs []app.JobStreamEvent, after int64) {
	t.Helper()
	for _, e := range evs {
		if e.ID <= after {
			t.Fatalf("event ids not increasing: %d after %d in %v", e.ID, after, types(evs))
		}
		after = e.ID
	}
}

func TestBrokerOrderResumeAndEnd(t *testing.T) {
	clk := newClock()
	b := jobs.NewBroker(clk.Now, 8, time.Minute)
	b.Publish(testJob(app.JobRunning, 0))
	s, ended := b.Follow(testJob(app.JobRunning, 0), 0)
	if ended {
		t.Fatal("ended for a running job")
	}
	evs, done := take(t, s)
	if len(evs) != 1 || evs[0].Type != app.StreamSnapshot || done {
		t.Fatalf("first events %v done=%v, want a snapshot", types(evs), done)
	}
	snapID := evs[0].ID
	b.Publish(testJob(app.JobRunning, 10))
	b.Publish(testJob(app.JobRunning, 20))
	evs, _ = take(t, s)
	if got := types(evs); len(got) != 2 || got[0] != app.StreamProgress || got[1] != app.StreamProgress {
		t.Fatalf("events %v, want two progress", got)
	}
	increasing(t, evs, snapID)
	var p struct {
		State    string          `json:"state"`
		Progress app.JobProgress `json:"progress"`
	}
	if err := json.Unmarshal(evs[1].Data, &p); err != nil || p.State != app.JobRunning || p.Progress.Percent != 20 {
		t.Fatalf("progress data %s (%v)", evs[1].Data, err)
	}
	resumeFrom := evs[0].ID // the client saw 10% and reconnects
	s.Close()

	b.Publish(testJob(app.JobSucceeded, 100))
	s2, _ := b.Follow(testJob(app.JobRunning, 0), resumeFrom)
	evs, done = take(t, s2)
	if got := types(evs); len(got) != 3 || got[0] != app.StreamProgress || got[1] != app.StreamState || got[2] != app.StreamEnd || !done {
		t.Fatalf("resumed events %v done=%v, want progress, state, end without a snapshot", got, done)
	}
	increasing(t, evs, resumeFrom)
	endID := evs[2].ID

	// A client that already has the end has nothing more to get.
	if _, ended := b.Follow(testJob(app.JobRunning, 0), endID); !ended {
		t.Fatal("resume after the end did not report ended")
	}
	// A fresh client of the finished job: snapshot and end at once.
	s3, _ := b.Follow(testJob(app.JobRunning, 0), 0)
	evs, done = take(t, s3)
	if got := types(evs); len(got) != 2 || got[0] != app.StreamSnapshot || got[1] != app.StreamEnd || !done || evs[1].ID != endID {
		t.Fatalf("finished job events %v done=%v", got, done)
	}
	increasing(t, evs, 0)
	var final app.Job
	if err := json.Unmarshal(evs[0].Data, &final); err != nil || final.State != app.JobSucceeded {
		t.Fatalf("snapshot of finished job: %s", evs[0].Data)
	}
}

func TestBrokerSlowSubscriberGetsFreshSnapshot(t *testing.T) {
	b := jobs.NewBroker(nil, 4, time.Minute)
	b.Publish(testJob(app.JobRunning, 0))
	s, _ := b.Follow(testJob(app.JobRunning, 0), 0)
	first, _ := take(t, s)
	for i := 1; i <= 20; i++ { // the subscriber reads nothing meanwhile; publishing never blocks
		b.Publish(testJob(app.JobRunning, i))
	}
	evs, _ := take(t, s)
	if evs[0].Type != app.StreamSnapshot {
		t.Fatalf("lagging subscriber got %v, want a fresh snapshot first", types(evs))
	}
	increasing(t, evs, first[0].ID)
	var j app.Job
	json.Unmarshal(evs[0].Data, &j)
	if j.Progress.Percent != 20 {
		t.Fatalf("snapshot at %d%%, want the current 20%%", j.Progress.Percent)
	}
}

func TestBrokerUnknownOrStaleLastEventIDGetsSnapshot(t *testing.T) {
	b := jobs.NewBroker(nil, 8, time.Minute)
	// An id from before a restart is smaller than anything this broker made.
	s, _ := b.Follow(testJob(app.JobQueued, 0), 12345)
	evs, _ := take(t, s)
	if len(evs) != 1 || evs[0].Type != app.StreamSnapshot || evs[0].ID <= 12345 {
		t.Fatalf("events %v (id %d), want a snapshot with a larger id", types(evs), evs[0].ID)
	}
	// A job that ended before anyone watched: snapshot and end.
	done := testJob(app.JobFailed, 30)
	done.ID = "job_2"
	s2, _ := b.Follow(done, 0)
	evs, fin := take(t, s2)
	if got := types(evs); len(got) != 2 || got[1] != app.StreamEnd || !fin {
		t.Fatalf("events %v, want snapshot and end", got)
	}
}
