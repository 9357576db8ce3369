package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"backstop/agentapi/wire"
)

// webhookSteps creates a webhook in the interface, sends the test event and
// sees it delivered in the log, checked against a receiver on 127.0.0.1.
func webhookSteps(t *testing.T, a *appliance, b *browser) {
	b.click("Webhooks")
	if !a.routeExists(t, "/api/v1/webhooks") {
		t.Fatal("the appliance serves no /api/v1/webhooks")
	}
	recv := newReceiver(t)

	b.waitText("No webhooks yet")
	b.click("New webhook")
	b.fill("Receiver URL", recv.URL+"/backstop")
	b.click("Create webhook")
	b.waitText("Copy the signing secret now.")
	secret := eval[string](b, `document.querySelector('#secret-value').value`)
	b.shot("08-webhook-secret")
	b.click("I have stored the secret")
	b.waitText("Delivery log")
	b.waitText("No deliveries yet")
	b.click("Send test event")
	b.waitText("Test event queued")
	first := recv.wait(t, 0)
	if want := sign(secret, first.body); len(first.signatures) != 1 || first.signatures[0] != want || !bytes.Contains(first.body, []byte(`"webhook.test"`)) {
		t.Errorf("delivery signatures %q (want one, %q), body %s", first.signatures, want, first.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(eval[string](b, `document.body.innerText`), "Delivered") {
		if time.Now().After(deadline) {
			b.fail("delivery shown as delivered", fmt.Errorf("timed out"))
		}
		b.click("Refresh")
		time.Sleep(300 * time.Millisecond)
	}
	b.run("open attempts", chromedpClickSelector("details summary"))
	b.waitText("204")
	b.shot("09-webhook-delivered")
	rotateAndReplaySteps(t, b, recv, secret)
}

// jobSteps watches a backup run's progress update live on its job page,
// driving the run through the agent API as an agent would, then sees it
// fail. It returns the failed job's id.
func jobSteps(t *testing.T, a *appliance, b *browser) (jobID string) {
	b.click("Jobs")
	if !a.routeExists(t, "/api/v1/jobs") || !a.routeExists(t, "/agent/v1/enroll") {
		t.Fatal("the appliance serves no /api/v1/jobs or /agent/v1/enroll")
	}
	b.waitText("No jobs yet")
	// An enrollment token from the interface's own "add machine" dialog.
	b.click("Servers & clients")
	b.click("Add machine")
	b.click("Show install command")
	b.waitText("Run this one line as root")
	install := eval[string](b, `document.querySelector('#secret-value').value`)
	b.shot("10-add-machine")
	b.click("Done")
	i := strings.Index(install, "--token ")
	if i < 0 {
		t.Fatalf("install command without a token: %q", install)
	}
	token := strings.Fields(install[i+len("--token "):])[0]

	var enrolled wire.EnrollResponse
	agentCall(t, a, "", "", "/agent/v1/enroll", wire.EnrollRequest{Token: token, Hostname: "fileserver-01", OS: "linux", Arch: "amd64",
		AgentVersion: "1.0.0"}, &enrolled)
	runID := "run_" + strings.Repeat("ab", 16)
	var started wire.RunStarted
	run := wire.RunStart{RunID: runID, Kind: "backup", Trigger: "schedule", StartedAt: time.Now().UTC()}
	agentCall(t, a, enrolled.EndpointID, enrolled.Secret, "/agent/v1/runs", run, &started)
	agentCall(t, a, enrolled.EndpointID, enrolled.Secret, "/agent/v1/runs/"+runID+"/progress",
		wire.Progress{Phase: "uploading", Percent: 12, FilesDone: 12, FilesTotal: 100, BytesDone: 1200, BytesTotal: 10000}, nil)

	// Open the job page in the app (no reload) with the page's first read
	// of the job held in the browser once answered, so that it reaches the
	// page only after the stream has moved on: an overtaken read must not
	// put the older progress back.
	b.open("/ui/jobs")
	b.waitText("Machine backup")
	eval[bool](b, fmt.Sprintf(`(() => {
		const path = '/api/v1/jobs/' + %s, real = window.fetch;
		window.__readHeld = false;
		const held = new Promise((r) => { window.__releaseRead = r; });
		window.fetch = async (url, opts) => {
			const res = await real(url, opts);
			if (url === path && !window.__readHeld) { window.__readHeld = true; await held; window.__readLet = true; }
			return res;
		};
		history.pushState(null, '', '/ui/jobs/' + %s);
		window.dispatchEvent(new PopStateEvent('popstate'));
		return true; })()`, js(started.JobID), js(started.JobID)))
	b.waitTrue("the first read held", `window.__readHeld === true`)
	b.waitTrue("the stream open", `[...document.querySelectorAll('[aria-live=polite]')].some((e) => e.textContent === 'Live')`)
	b.waitText("12%")
	agentCall(t, a, enrolled.EndpointID, enrolled.Secret, "/agent/v1/runs/"+runID+"/progress",
		wire.Progress{Phase: "uploading", Percent: 64, FilesDone: 64, FilesTotal: 100, BytesDone: 6400, BytesTotal: 10000}, nil)
	sent := time.Now()
	b.waitText("64%") // no reload: the page updated itself
	// Through the event stream the update shows at once; a delay of 5 s or
	// more means it came from the page's stalled-stream re-read instead.
	if d := time.Since(sent); d > 3*time.Second {
		t.Errorf("progress 12%% -> 64%% shown %s after the agent reported it: not through the event stream", d.Round(time.Millisecond))
	}
	eval[bool](b, `(window.__releaseRead(), true)`) // the held read (12%) arrives now
	b.waitTrue("the held read let through", `window.__readLet === true`)
	time.Sleep(500 * time.Millisecond) // its body parsed and the page drawn
	if p := eval[string](b, `document.querySelector('[data-testid=job-percent]').textContent`); p != "64%" {
		t.Errorf("after a read the stream overtook arrived, the page shows %s, want 64%%", p)
	}
	progressBarSteps(t, b)
	b.shot("10-job-live")
	failureSteps(t, a, b, enrolled, run, started.JobID)

	// The machine's page: recent runs, rename, revoke with confirmation.
	b.open("/ui/endpoints/" + enrolled.EndpointID)
	b.waitText("Recent runs")
	b.waitText("Machine backup")
	b.click("Rename")
	b.fill("Display name", "File server (Berlin)")
	b.click("Save")
	b.waitText("File server (Berlin)")
	b.click("Revoke")
	b.waitText("Revoke this machine?")
	b.click("Revoke machine")
	b.waitText("This machine is revoked")
	b.shot("10-endpoint-revoked")
	req, _ := http.NewRequest(http.MethodGet, a.URL+"/agent/v1/config", nil)
	req.SetBasicAuth(enrolled.EndpointID, enrolled.Secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked endpoint: GET /agent/v1/config = %d, want 401", res.StatusCode)
	}
	return started.JobID
}

// agentCall posts JSON to the agent API with the endpoint's credentials.
func agentCall(t testing.TB, a *appliance, id, secret, path string, in, out any) {
	t.Helper()
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, a.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.SetBasicAuth(id, secret)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", path, res.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: %v in %s", path, err, raw)
		}
	}
}
