package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver is a webhook receiver on 127.0.0.1 that keeps every request.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

type received struct {
	body       []byte
	signatures []string // every X-Service-Signature field line
	delivery   string   // X-Service-Delivery
	eventID    string   // the envelope's id
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			ID string `json:"id"`
		}
		json.Unmarshal(body, &env)
		rc.mu.Lock()
		rc.got = append(rc.got, received{body: body, signatures: r.Header.Values("X-Service-Signature"),
			delivery: r.Header.Get("X-Service-Delivery"), eventID: env.ID})
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// wait returns the n-th request (0-based) once it has arrived.
func (rc *receiver) wait(t *testing.T, n int) received {
	t.Helper()
	waitFor(t, fmt.Sprintf("delivery %d at the receiver", n+1), 20*time.Second, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return len(rc.got) > n
	})
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[n]
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// rotateAndReplaySteps continues on a webhook's page whose first delivery
// (the test event, signed with oldSecret) has arrived at rc: it rotates the
// secret (the new one shown once), sends another test event and checks it
// at the receiver against the NEW secret, then replays a delivery and sees
// the replay in the log as a new delivery with its attempt.
func rotateAndReplaySteps(t *testing.T, b *browser, rc *receiver, oldSecret string) {
	b.click("Rotate secret")
	b.waitText("Rotate the signing secret?")
	b.click("Rotate secret") // the dialog's confirm button, the last one with that label
	b.waitText("New signing secret")
	b.waitText("Copy the signing secret now.")
	newSecret := eval[string](b, `document.querySelector('#secret-value').value`)
	if newSecret == "" || newSecret == oldSecret {
		t.Fatalf("rotated secret %q (old %q)", newSecret, oldSecret)
	}
	b.shot("09-webhook-rotated")
	b.click("I have stored the secret")
	if strings.Contains(b.text(), newSecret) || eval[int](b, `document.querySelectorAll('#secret-value').length`) != 0 {
		t.Fatal("the new secret is still on the page after its dialog closed")
	}

	b.click("Send test event")
	b.waitText("Test event queued")
	second := rc.wait(t, 1)
	if len(second.signatures) == 0 || second.signatures[0] != sign(newSecret, second.body) {
		t.Fatalf("after rotation X-Service-Signature is %q, want the new secret's %q", second.signatures, sign(newSecret, second.body))
	}
	for _, s := range second.signatures {
		if s != sign(newSecret, second.body) && s != sign(oldSecret, second.body) {
			t.Fatalf("signature %q matches neither the old nor the new secret", s)
		}
	}

	// Replay the newest delivery: a new delivery of the same event.
	rows := func() int { return eval[int](b, `document.querySelectorAll('tr[data-delivery]').length`) }
	waitRows := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for rows() != n || strings.Count(b.text(), "Delivered") < n {
			if time.Now().After(deadline) {
				b.fail(fmt.Sprintf("%d deliveries shown as delivered", n), fmt.Errorf("timed out"))
			}
			b.click("Refresh")
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitRows(2)
	b.run("click Replay", chromedpClickSelector(fmt.Sprintf(`tr[data-delivery=%q] td.num button`, second.delivery)))
	replayed := rc.wait(t, 2)
	if replayed.eventID != second.eventID || replayed.delivery == second.delivery {
		t.Fatalf("replay: event %q delivery %q; want event %q in a new delivery (not %q)", replayed.eventID, replayed.delivery, second.eventID, second.delivery)
	}
	if replayed.signatures[0] != sign(newSecret, replayed.body) {
		t.Fatalf("replay signed %q, want %q", replayed.signatures[0], sign(newSecret, replayed.body))
	}
	waitRows(3)
	if !strings.Contains(b.text(), replayed.delivery) {
		t.Fatalf("the replayed delivery %s is not in the log:\n%s", replayed.delivery, b.text())
	}
	// Its attempt, with the receiver's answer.
	b.run("open the replay's attempts", chromedpClickSelector(fmt.Sprintf(`tr[data-delivery=%q] details summary`, replayed.delivery)))
	b.waitTrue("the replay's attempt", fmt.Sprintf(`(() => { const r = document.querySelector('tr[data-delivery=%q]');
		return !!r && r.querySelector('details').open && r.innerText.includes('1 attempt') && r.querySelector('table.attempts').innerText.includes('204'); })()`, replayed.delivery))
	b.shot("09-webhook-replayed")
}
