package jobs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
)

func TestSubmitUnknownKindIsValidationError(t *testing.T) {
	db := openDB(t, "")
	r := startRunner(t, db, jobs.Config{})
	_, err := r.Submit(context.Background(), app.JobRequest{TenantID: "tn_a", Action: app.ActionBackup,
		TargetType: "protected_object", TargetID: "po_x", Trigger: app.TriggerAPI})
	var ae *app.Error
	if !errors.As(err, &ae) || ae.Code != app.EINVALID || ae.Field != "body.targetType" {
		t.Fatalf("err = %v, want validation_failed on body.targetType", err)
	}
	_, err = r.Submit(context.Background(), app.JobRequest{TenantID: "tn_a", Action: app.ActionRestore, TargetID: "snap"})
	if !errors.As(err, &ae) || ae.Field != "body.snapshotId" {
		t.Fatalf("restore err = %v, want validation_failed on body.snapshotId", err)
	}
}

func TestSubmitOtherTenantsTargetIsNotFound(t *testing.T) {
	db := openDB(t, "")
	r := startRunner(t, db, jobs.Config{}, thingKind(func(ctx context.Context, r *jobs.Run) (*jobs.Outcome, error) { return nil, nil }))
	_, err := r.Submit(context.Background(), app.JobRequest{TenantID: "tn_a", Action: app.ActionBackup,
		TargetType: "thing", TargetID: "tn_b-1", Trigger: app.TriggerAPI})
	if app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("err = %v, want not_found", err)
	}
}

func TestRunReportsItemsAndEndsPartialWithEvent(t *testing.T) {
	db := openDB(t, "")
	r := startRunner(t, db, jobs.Config{}, thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		run.Progress(ctx, app.JobProgress{Phase: "transferring", Percent: 50, ItemsDone: 1, ItemsTotal: 4})
		for i, code := range []string{"graph.throttled", "imap.auth_failed", "graph.throttled", "storage.full"} {
			ref := []string{"a", "b", "c", "d"}[i]
			if err := run.ItemFailed(ctx, ref, "item "+ref, app.Fail(code, nil, errors.New("password=hunter2 refused"))); err != nil {
				return nil, err
			}
		}
		return &jobs.Outcome{SnapshotID: "snap1"}, nil
	}))
	j := submit(t, r, "tn_a-1")
	waitFor(t, "job end", func() bool { return app.JobTerminal(jobState(t, db, j.ID)) })
	got, _ := db.Job(context.Background(), j.ID)
	if got.State != app.JobPartial || got.ItemsFailed != 4 || got.Failure != nil || got.ErrorMessage != nil {
		t.Fatalf("job = %+v, want partial, 4 failed items, no failure", got)
	}
	if got.SnapshotID == nil || *got.SnapshotID != "snap1" || got.DurationMs == nil || got.Progress.Percent != 100 {
		t.Fatalf("job = %+v, want snapshot snap1, a duration and 100%%", got)
	}
	want := []app.ItemCause{{Code: "graph.throttled", Category: app.CategoryThrottling, Count: 2},
		{Code: "imap.auth_failed", Category: app.CategoryAuth, Count: 1}, {Code: "storage.full", Category: app.CategoryStorage, Count: 1}}
	if len(got.ItemCauses) != 3 || got.ItemCauses[0] != want[0] || got.ItemCauses[1] != want[1] || got.ItemCauses[2] != want[2] {
		t.Fatalf("itemCauses = %+v, want %+v", got.ItemCauses, want)
	}
	items, _ := db.JobItems(context.Background(), j.ID, 10)
	if len(items) != 4 || items[0].Failure.Details != "graph.throttled: password=[redacted] refused" {
		t.Fatalf("items = %+v; first details %q", items, items[0].Failure.Details)
	}
	evs := events(t, db)
	if len(evs) != 1 || evs[0]["type"] != app.EventJobCompleted {
		t.Fatalf("events = %v, want one job.completed", evs)
	}
	data := evs[0]["data"].(map[string]any)
	if job := data["job"].(map[string]any); job["id"] != j.ID || job["state"] != "partial" || job["failure"] != nil {
		t.Fatalf("data.job = %v", job)
	}
}

func TestTransientFailureRetriesWithBackoff(t *testing.T) {
	clk := newClock()
	db := openDB(t, "")
	db.Now = clk.Now
	var calls atomic.Int32
	r := startRunner(t, db, jobs.Config{Now: clk.Now, Backoff: []time.Duration{time.Minute, 5 * time.Minute}},
		thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
			if calls.Add(1) < 3 {
				return nil, app.Fail("imap.connection_failed", map[string]any{"host": "mail.example.com"}, errors.New("dial tcp: i/o timeout"))
			}
			return nil, nil
		}))
	first := submit(t, r, "tn_a-1")
	waitFor(t, "first failure", func() bool { return jobState(t, db, first.ID) == app.JobFailed })
	f1, _ := db.Job(context.Background(), first.ID)
	if f1.Failure.Retry.State != app.RetryScheduled || f1.Failure.Retry.Attempt != 1 || f1.Failure.Retry.MaxAttempts != 3 ||
		!f1.Failure.Retry.NextAt.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("retry = %+v, want scheduled attempt 1 of 3 at now+1m", f1.Failure.Retry)
	}
	if f1.Failure.Code != "imap.connection_failed" || !f1.Failure.Transient || f1.Failure.Params["host"] != "mail.example.com" {
		t.Fatalf("failure = %+v", f1.Failure)
	}
	queued, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobQueued})
	if len(queued) != 1 || queued[0].Trigger != app.TriggerRetry || queued[0].RetryOf != first.ID || queued[0].Attempt != 2 {
		t.Fatalf("queued = %+v, want one retry job of attempt 2", queued)
	}
	second := queued[0]

	// Not due yet: poking does not start it.
	r.Poke()
	time.Sleep(20 * time.Millisecond)
	if s := jobState(t, db, second.ID); s != app.JobQueued {
		t.Fatalf("retry ran before it was due: %s", s)
	}
	clk.Add(time.Minute)
	r.Poke()
	waitFor(t, "second failure", func() bool { return jobState(t, db, second.ID) == app.JobFailed })
	f2, _ := db.Job(context.Background(), second.ID)
	if f2.Failure.Retry.State != app.RetryScheduled || !f2.Failure.Retry.NextAt.Equal(clk.Now().Add(5*time.Minute)) {
		t.Fatalf("second retry = %+v, want scheduled at now+5m", f2.Failure.Retry)
	}
	clk.Add(5 * time.Minute)
	r.Poke()
	waitFor(t, "third attempt", func() bool {
		js, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobSucceeded})
		return len(js) == 1 && js[0].Attempt == 3
	})
	var failed, completed int
	for _, e := range events(t, db) {
		switch e["type"] {
		case app.EventJobFailed:
			failed++
		case app.EventJobCompleted:
			completed++
		}
	}
	if failed != 2 || completed != 1 {
		t.Fatalf("events: %d job.failed, %d job.completed; want 2 and 1", failed, completed)
	}
}

func TestRetriesExhaustAndPermanentFailuresDoNotRetry(t *testing.T) {
	clk := newClock()
	db := openDB(t, "")
	db.Now = clk.Now
	code := atomic.Value{}
	code.Store("graph.throttled")
	k := thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		return nil, app.Fail(code.Load().(string), map[string]any{"retryAfterSeconds": 600}, errors.New("429"))
	})
	k.MaxAttempts = 2
	r := startRunner(t, db, jobs.Config{Now: clk.Now}, k)
	first := submit(t, r, "tn_a-1")
	waitFor(t, "first failure", func() bool { return jobState(t, db, first.ID) == app.JobFailed })
	f1, _ := db.Job(context.Background(), first.ID)
	if !f1.Failure.Retry.NextAt.Equal(clk.Now().Add(10 * time.Minute)) {
		t.Fatalf("nextAt = %v, want now+600s (retryAfterSeconds beats the 1m backoff)", f1.Failure.Retry.NextAt)
	}
	clk.Add(10 * time.Minute)
	r.Poke()
	waitFor(t, "second failure", func() bool {
		js, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobFailed})
		return len(js) == 2
	})
	js, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobFailed})
	if js[0].Failure.Retry.State != app.RetryExhausted || js[0].Failure.Retry.Attempt != 2 {
		t.Fatalf("retry = %+v, want exhausted at attempt 2", js[0].Failure.Retry)
	}
	if q, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobQueued}); len(q) != 0 {
		t.Fatalf("%d jobs queued after exhaustion", len(q))
	}

	code.Store("imap.auth_failed")
	perm := submit(t, r, "tn_a-2")
	waitFor(t, "permanent failure", func() bool { return jobState(t, db, perm.ID) == app.JobFailed })
	p, _ := db.Job(context.Background(), perm.ID)
	if p.Failure.Retry.State != app.RetryNone || p.Failure.Transient || len(p.Failure.FixSteps) == 0 {
		t.Fatalf("failure = %+v, want no retry, fix steps", p.Failure)
	}
	if p.ErrorMessage == nil || *p.ErrorMessage != "IMAP sign-in refused: imap.auth_failed: 429" {
		t.Fatalf("errorMessage = %v", p.ErrorMessage)
	}
}

func TestWorkerPoolIsBounded(t *testing.T) {
	db := openDB(t, "")
	release := make(chan struct{})
	var running, peak atomic.Int32
	r := startRunner(t, db, jobs.Config{Workers: map[string]int{app.QueueIMAPBackup: 2}},
		thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			<-release
			running.Add(-1)
			return nil, nil
		}))
	var ids []string
	for i := range 5 {
		ids = append(ids, submit(t, r, "tn_a-"+string(rune('0'+i))).ID)
	}
	waitFor(t, "two running", func() bool { return running.Load() == 2 })
	time.Sleep(30 * time.Millisecond) // give an unbounded pool the chance to start more
	if q, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobQueued}); len(q) != 3 || r.Busy(app.QueueIMAPBackup) != 2 {
		t.Fatalf("queued = %d, busy = %d; want 3 and 2", len(q), r.Busy(app.QueueIMAPBackup))
	}
	close(release)
	waitFor(t, "all done", func() bool {
		js, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobSucceeded})
		return len(js) == 5
	})
	if peak.Load() != 2 {
		t.Fatalf("peak concurrency %d, want 2", peak.Load())
	}
}

func TestOpenRequeuesJobsLeftRunning(t *testing.T) {
	db := openDB(t, "")
	left := &app.Job{TenantID: "tn_a", Queue: app.QueueIMAPBackup, State: app.JobRunning, Action: app.ActionBackup,
		Target: app.JobTarget{Type: "thing", ID: "tn_a-1"}, Trigger: app.TriggerAPI, StartedAt: app.Ptr(app.At(time.Now())),
		Params: []byte(`{"full":true}`)}
	if err := db.CreateJob(context.Background(), left); err != nil {
		t.Fatal(err)
	}
	var params atomic.Value
	r := startRunner(t, db, jobs.Config{}, thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		params.Store(string(run.Job.Params))
		return nil, nil
	}))
	_ = r
	got, _ := db.Job(context.Background(), left.ID)
	if got.State != app.JobInterrupted || got.Failure != nil || got.FinishedAt == nil {
		t.Fatalf("left-over job = %+v, want interrupted without failure", got)
	}
	waitFor(t, "re-run", func() bool {
		js, _ := db.Jobs(context.Background(), app.JobFilter{State: app.JobSucceeded})
		return len(js) == 1 && js[0].RetryOf == left.ID && js[0].Trigger == app.TriggerRetry
	})
	if params.Load() != `{"full":true}` {
		t.Fatalf("re-run params = %v", params.Load())
	}
	for _, e := range events(t, db) {
		if job := e["data"].(map[string]any)["job"].(map[string]any); job["id"] == left.ID {
			t.Fatalf("the interrupted job raised %v", e["type"])
		}
	}
}

func TestExternalExecutorLifecycle(t *testing.T) {
	db := openDB(t, "")
	ext := thingKind(nil)
	ext.Action, ext.Queue = app.ActionVerify, app.QueueVerify
	ext.EventData = func(ctx context.Context, j *app.Job) (map[string]any, error) {
		return map[string]any{"endpoint": map[string]any{"id": j.Target.ID}}, nil
	}
	r := startRunner(t, db, jobs.Config{}, ext)
	ctx := context.Background()
	j, err := r.Submit(ctx, app.JobRequest{TenantID: "tn_a", Action: app.ActionVerify, TargetType: "thing", TargetID: "tn_a-1", Trigger: app.TriggerAPI})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if s := jobState(t, db, j.ID); s != app.JobQueued {
		t.Fatalf("external job state %s before Start; the local pool must not take it", s)
	}
	if _, err := r.Start(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, j.ID); app.ErrorCode(err) != app.ECONFLICT {
		t.Fatalf("second Start: %v, want conflict", err)
	}
	if err := r.Progress(ctx, j.ID, app.JobProgress{Phase: "verifying", Percent: 40}); err != nil {
		t.Fatal(err)
	}
	f := app.NewFailure("verify.hash_mismatch", map[string]any{"path": "/etc/hosts", "mismatched": 1}, "sha256 differs", "verify", time.Now())
	end, err := r.Finish(ctx, j.ID, &jobs.Outcome{Failure: f, Result: map[string]any{"state": "failed", "sampled": 10, "matched": 9, "mismatched": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if end.State != app.JobFailed || end.Failure.Code != "verify.hash_mismatch" || end.Failure.Retry.State != app.RetryNone {
		t.Fatalf("end = %+v", end)
	}
	if _, err := r.Finish(ctx, j.ID, &jobs.Outcome{}); app.ErrorCode(err) != app.ECONFLICT {
		t.Fatalf("second Finish: %v, want conflict", err)
	}
	evs := events(t, db)
	byType := map[any]map[string]any{}
	for _, e := range evs {
		byType[e["type"]] = e
	}
	if len(evs) != 2 || byType[app.EventJobFailed] == nil || byType[app.EventVerifyCompleted] == nil {
		t.Fatalf("events = %v, want job.failed and verify.completed", evs)
	}
	if causes := byType[app.EventJobFailed]["data"].(map[string]any)["job"].(map[string]any)["itemCauses"]; causes == nil {
		t.Fatal("data.job.itemCauses is null, want a list")
	}
	data := byType[app.EventVerifyCompleted]["data"].(map[string]any)
	if data["result"].(map[string]any)["mismatched"] != 1.0 || data["endpoint"].(map[string]any)["id"] != "tn_a-1" {
		t.Fatalf("verify.completed data = %v", data)
	}

	// An interrupted external run raises nothing and is queued again.
	j2, _ := r.StartNow(ctx, app.JobRequest{TenantID: "tn_a", Action: app.ActionVerify, TargetType: "thing", TargetID: "tn_a-2", Trigger: app.TriggerSchedule})
	if _, err := r.Finish(ctx, j2.ID, &jobs.Outcome{State: app.JobInterrupted}); err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, db)); n != 2 {
		t.Fatalf("%d events after an interruption, want still 2", n)
	}
	if q, _ := db.ActiveJobFor(ctx, app.ActionVerify, "thing", "tn_a-2"); q == nil || q.RetryOf != j2.ID || q.Executor != app.ExecutorExternal {
		t.Fatalf("re-queued = %+v", q)
	}
}

func TestScheduleFireSkipsWhileActive(t *testing.T) {
	db := openDB(t, "")
	block := make(chan struct{})
	defer close(block)
	r := startRunner(t, db, jobs.Config{}, thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	}))
	s := &app.JobSchedule{ID: "sch_1", TenantID: "tn_a", Action: app.ActionBackup, TargetType: "thing", TargetID: "tn_a-1", Spec: "@every 1h"}
	j := r.Fire(context.Background(), s)
	if j == nil || j.Trigger != app.TriggerSchedule {
		t.Fatalf("first firing = %+v", j)
	}
	if again := r.Fire(context.Background(), s); again != nil {
		t.Fatalf("second firing started %s while the first is active", again.ID)
	}
	if err := jobs.ValidateSchedule("61 * * * *"); err == nil {
		t.Fatal("a bad cron expression was accepted")
	}
	if err := jobs.ValidateSchedule("30 2 * * 1-5"); err != nil {
		t.Fatal(err)
	}
}

// A job whose runs keep being cut off by the process stopping is re-queued,
// but the third interruption in a row fails it instead of looping for ever.
func TestRepeatedInterruptionsFailTheJob(t *testing.T) {
	db := openDB(t, "")
	ctx := context.Background()
	prev := ""
	for i, state := range []string{app.JobInterrupted, app.JobInterrupted, app.JobRunning} {
		j := &app.Job{TenantID: "tn_a", Queue: app.QueueIMAPBackup, State: state, Action: app.ActionBackup,
			Target: app.JobTarget{Type: "thing", ID: "tn_a-1"}, Trigger: app.TriggerAPI, StartedAt: app.Ptr(app.At(time.Now())),
			RetryOf: prev, Attempt: 1, MaxAttempts: 3}
		if i > 0 {
			j.Trigger = app.TriggerRetry
		}
		if state == app.JobInterrupted {
			j.FinishedAt = app.Ptr(app.At(time.Now()))
		}
		if err := db.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		prev = j.ID
	}
	var ran atomic.Int32
	startRunner(t, db, jobs.Config{}, thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		ran.Add(1)
		return nil, nil
	}))
	got, err := db.Job(ctx, prev)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != app.JobFailed || got.Failure == nil || got.Failure.Code != app.CodeInterruptedRepeatedly ||
		got.Failure.Retry.State != app.RetryNone {
		t.Fatalf("third interrupted run = %+v (failure %+v), want failed with %s and no retry", got, got.Failure, app.CodeInterruptedRepeatedly)
	}
	if js, _ := db.Jobs(ctx, app.JobFilter{State: app.JobQueued}); len(js) != 0 || ran.Load() != 0 {
		t.Fatalf("re-queued %d jobs and ran %d, want none", len(js), ran.Load())
	}
	var failed int
	for _, e := range events(t, db) {
		if e["type"] == app.EventJobFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d job.failed events, want 1", failed)
	}
}

// Stored schedules fire: several sharing a spec (one cron entry fires them
// all), one with its own spec, one saved after the start with a spec the
// cron has; a disabled one never does.
func TestStoredSchedulesFire(t *testing.T) {
	db := openDB(t, "")
	ctx := context.Background()
	if err := db.CreateTenant(ctx, &app.Tenant{ID: "tn_a", Name: "A"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*app.JobSchedule{
		{ID: "sch_a", TenantID: "tn_a", Action: app.ActionBackup, TargetType: "thing", TargetID: "tn_a-1", Spec: "@every 1s", Enabled: true},
		{ID: "sch_b", TenantID: "tn_a", Action: app.ActionBackup, TargetType: "thing", TargetID: "tn_a-2", Spec: "@every 1s", Enabled: true},
		{ID: "sch_c", TenantID: "tn_a", Action: app.ActionBackup, TargetType: "thing", TargetID: "tn_a-3", Spec: "@every 2s", Enabled: true},
		{ID: "sch_d", TenantID: "tn_a", Action: app.ActionBackup, TargetType: "thing", TargetID: "tn_a-4", Spec: "@every 1s", Enabled: false},
	} {
		if err := db.SaveJobSchedule(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	startRunner(t, db, jobs.Config{Schedules: db}, thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		return nil, nil
	}))
	fired := func(target string) bool {
		js, err := db.Jobs(ctx, app.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			if j.Target.ID == target && j.Trigger == app.TriggerSchedule {
				return true
			}
		}
		return false
	}
	// The cron holds the expressions only: a schedule saved since the
	// start with one of them fires without a reload.
	late := &app.JobSchedule{ID: "sch_e", TenantID: "tn_a", Action: app.ActionBackup, TargetType: "thing", TargetID: "tn_a-5", Spec: "@every 1s", Enabled: true}
	if err := db.SaveJobSchedule(ctx, late); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !(fired("tn_a-1") && fired("tn_a-2") && fired("tn_a-3") && fired("tn_a-5")) {
		if time.Now().After(deadline) {
			t.Fatalf("not every enabled schedule fired within 5 s: %v %v %v %v", fired("tn_a-1"), fired("tn_a-2"), fired("tn_a-3"), fired("tn_a-5"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if fired("tn_a-4") {
		t.Fatal("a disabled schedule fired")
	}
}
