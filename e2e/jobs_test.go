package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"backstop/agentapi/wire"
)

// progressBarSteps checks, on a job page showing a percentage, that the
// bar's filled width reaches that percentage within a short transition
// (a long one once made a screenshot show 18 % of bar beside "64%").
func progressBarSteps(t *testing.T, b *browser) {
	start := time.Now()
	b.waitTrue("the bar's width matches the percentage shown", `(() => {
		const shown = parseFloat(document.querySelector('[data-testid=job-percent]').textContent);
		const bar = document.querySelector('[role=progressbar]');
		const fill = bar.querySelector('span');
		const width = fill.getBoundingClientRect().width / bar.getBoundingClientRect().width * 100;
		return Math.abs(width - shown) < 0.5 && Number(bar.getAttribute('aria-valuenow')) === Math.round(shown);
	})()`)
	if d := time.Since(start); d > time.Second {
		t.Errorf("the progress bar took %s to reach the percentage shown", d.Round(time.Millisecond))
	}
}

// failureSteps finishes the running job of runID as failed, the way the
// agent reports a restic run that could not open the repository, and
// follows the job page (already open) to the failure's explanation.
func failureSteps(t *testing.T, a *appliance, b *browser, enrolled wire.EnrollResponse, run wire.RunStart, jobID string) {
	agentCall(t, a, enrolled.EndpointID, enrolled.Secret, "/agent/v1/runs/"+run.RunID+"/finish", wire.Finish{
		Run: run, State: "failed", FinishedAt: time.Now().UTC(),
		Failure: &wire.Failure{Code: "restic.wrong_password", Message: "restic could not open the repository: wrong password",
			ExitCode: 12, Step: "backup", Params: map[string]string{"hostname": "fileserver-01"},
			Details: "Fatal: wrong password or no key found"},
	}, nil)
	// The open page turns to the failure by itself (the stream's end event).
	b.waitText("Why it failed")
	type failure struct {
		Code     string   `json:"code"`
		FixSteps []string `json:"fixSteps"`
		DocsURL  string   `json:"docsUrl"`
	}
	type failedJob struct {
		State        string  `json:"state"`
		ErrorMessage string  `json:"errorMessage"`
		Failure      failure `json:"failure"`
	}
	job := eval[failedJob](b, fmt.Sprintf(`fetch('/api/v1/jobs/%s').then((r) => r.json())`, jobID))
	if job.State != "failed" || job.Failure.Code != "restic.wrong_password" || len(job.Failure.FixSteps) == 0 ||
		job.Failure.DocsURL != "/ui/failure-codes#restic.wrong_password" {
		t.Fatalf("the failed job as the API gives it: %+v", job)
	}
	page := eval[string](b, `document.querySelector('main').textContent`) // as written, before text-transform
	for _, want := range append([]string{"Failed", job.ErrorMessage, "restic.wrong_password", "How to fix it"}, job.Failure.FixSteps...) {
		if !strings.Contains(page, want) {
			t.Fatalf("the failed job's page does not show %q:\n%s", want, page)
		}
	}
	b.shot("10-job-failed")

	b.click("Read more about restic.wrong_password")
	b.waitTrue("the followed cause's note", `document.querySelector('.target-note')?.textContent === 'The cause you followed'`)
	if loc := eval[string](b, `location.pathname + location.hash`); loc != job.Failure.DocsURL {
		t.Fatalf("the docs link led to %q, want %q", loc, job.Failure.DocsURL)
	}
	// The code's entry is the one marked, and it is on screen.
	b.waitTrue("the code's entry marked and scrolled to", `(() => {
		const marked = [...document.querySelectorAll('section.target')];
		if (marked.length !== 1 || marked[0].id !== 'restic.wrong_password' || marked[0].getAttribute('aria-current') !== 'location') return false;
		const r = marked[0].getBoundingClientRect();
		return r.top >= 0 && r.top < innerHeight;
	})()`)
	if n := eval[int](b, `document.querySelectorAll('section.panel').length`); n < 5 {
		t.Fatalf("the failure codes page lists %d codes", n)
	}
	b.shot("10-failure-code")
}
