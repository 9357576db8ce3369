package restapi

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/archive/chain"
	"backstop/app/jobs"

	"golang.org/x/mod/sumdb/tlog"
)

// archiveJobs gives the archive harness a running job runner that knows
// the archive_verify kind (as archive_mount.go registers it in serve).
func archiveJobs(t *testing.T, h *harness, svc *archive.Service) {
	t.Helper()
	runner := jobs.New(jobs.Config{Store: h.db, Logger: discardLogger()})
	runner.Register(jobs.Kind{
		Action: app.ActionVerify, TargetType: archive.TargetArchive, Queue: app.QueueArchiveVerify, MaxAttempts: 1,
		Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
			if tenantID != "" && targetID != tenantID {
				return app.JobTarget{}, app.NotFound("archive")
			}
			tn, err := h.db.Tenant(ctx, targetID)
			if err != nil {
				return app.JobTarget{}, err
			}
			return app.JobTarget{Type: archive.TargetArchive, ID: tn.ID, DisplayName: "Archive of " + tn.Name}, nil
		},
		Run: func(ctx context.Context, r *jobs.Run) (*jobs.Outcome, error) {
			if _, err := svc.VerifyChain(ctx, r.Job.Target.ID, r.Job.ID, nil); err != nil {
				return nil, err
			}
			return &jobs.Outcome{}, nil
		},
	})
	if err := runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close() })
	h.srv.JobStore, h.srv.JobRunner, h.srv.JobFeed = h.db, runner, runner.Broker()
}

// waitJob polls GET /jobs/{id} until the job ends and returns it.
func waitJob(t *testing.T, h *harness, key, id string) map[string]any {
	t.Helper()
	for range 1000 {
		r := h.do("GET", "/api/v1/jobs/"+id, "", bearer(key)...)
		check(t, r, 200, "")
		j := r.json()
		switch j["state"] {
		case "succeeded", "failed", "canceled", "partial":
			return j
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("job %s did not end", id)
	return nil
}

// waitChain polls GET /archive/chain until its checkpoint covers size records.
func waitChain(t *testing.T, h *harness, key string, size int64) archive.ChainView {
	t.Helper()
	var v archive.ChainView
	for range 500 {
		r := h.do("GET", "/api/v1/archive/chain", "", bearer(key)...)
		check(t, r, 200, "")
		v = archive.ChainView{}
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatal(err)
		}
		if v.Size >= size {
			return v
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the chain's checkpoint stays at %d, want %d", v.Size, size)
	return v
}

func b64Hashes(t *testing.T, ss []string) tlog.TreeProof {
	t.Helper()
	out := make(tlog.TreeProof, len(ss))
	for i, s := range ss {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			t.Fatalf("proof hash %q: %v", s, err)
		}
		copy(out[i][:], b)
	}
	return out
}

func TestArchiveRoutes(t *testing.T) {
	h, svc, signer := archiveHarness(t)
	archiveJobs(t, h, svc)
	ctx := context.Background()
	tenant := h.tenantA.ID
	origin := "backstop.test/archive/" + tenant
	h.user("admin@a.test", "pw-a", tenant)
	h.user("admin@b.test", "pw-b", h.tenantB.ID)
	cookie, csrf := h.session("admin@a.test", "pw-a")
	as := []any{cookie, "X-CSRF-Token", csrf}
	cookieB, csrfB := h.session("admin@b.test", "pw-b")
	bs := []any{cookieB, "X-CSRF-Token", csrfB}
	readKey, _ := h.key(tenant, app.ScopeArchiveRead, app.ScopeStatusRead, app.ScopeJobsRead)
	noScope, _ := h.key(tenant, app.ScopeStatusRead, app.ScopeJobsRead)
	keyB, _ := h.key(h.tenantB.ID, app.ScopeArchiveRead)

	archiveState := func() string {
		t.Helper()
		r := h.do("GET", "/api/v1/status", "", bearer(readKey)...)
		check(t, r, 200, "")
		a, _ := r.json()["archive"].(map[string]any)
		s, _ := a["chainState"].(string)
		return s
	}

	// Scopes: archive:read reads, other keys 403, no key 401.
	reads := []string{"/api/v1/archive/status", "/api/v1/archive/channels", "/api/v1/archive/chain",
		"/api/v1/archive/chain/checkpoint", "/api/v1/archive/chain/consistency?from=1&to=1", "/api/v1/archive/records/0?proof=true"}
	for _, p := range reads {
		check(t, h.do("GET", p, ""), 401, "unauthorized")
		check(t, h.do("GET", p, "", bearer(noScope)...), 403, "insufficient_scope")
	}
	check(t, h.do("POST", "/api/v1/archive/chain/verify", "", bearer(noScope)...), 403, "insufficient_scope")
	check(t, h.do("POST", "/api/v1/archive/chain/verify", ""), 401, "unauthorized")

	// Empty: no records, no checkpoint.
	r := h.do("GET", "/api/v1/archive/chain", "", bearer(readKey)...)
	check(t, r, 200, "", `"state":"empty"`, `"size":0`, `"rootHash":""`, `"checkpointAt":null`)
	var cv archive.ChainView
	json.Unmarshal(r.body, &cv)
	if cv.VerifierKey != signer.VerifierKey() || cv.TenantID != tenant || cv.Origin != origin {
		t.Fatalf("chain %+v", cv)
	}
	check(t, h.do("GET", "/api/v1/archive/status", "", bearer(readKey)...), 200, "",
		`"messages":0`, `"state":"empty"`, `"channels":[]`)
	check(t, h.do("GET", "/api/v1/archive/chain/checkpoint", "", bearer(readKey)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/records/0", "", bearer(readKey)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/chain/consistency?from=1&to=1", "", bearer(readKey)...), 422, "validation_failed")
	if s := archiveState(); s != "empty" {
		t.Fatalf("status archive.chainState %q, want empty", s)
	}

	// Channels: created and deleted by a session only (API keys 401).
	body := `{"kind":"smtp_journal","displayName":"Journal"}`
	check(t, h.do("POST", "/api/v1/archive/channels", body, bearer(readKey)...), 401, "unauthorized")
	check(t, h.do("POST", "/api/v1/archive/channels", body), 401, "unauthorized")
	check(t, h.do("POST", "/api/v1/archive/channels", `{"kind":"smtp_journal","tenantId":"`+tenant+`"}`, bs...), 404, "not_found")
	r = h.do("POST", "/api/v1/archive/channels", body, as...)
	check(t, r, 201, "", `"kind":"smtp_journal"`, `"displayName":"Journal"`)
	var chv archive.ChannelView
	json.Unmarshal(r.body, &chv)
	if chv.TenantID != tenant || chv.Address == nil || !strings.HasSuffix(*chv.Address, "@journal.test") || len(*chv.Address) <= len("@journal.test") {
		t.Fatalf("channel %s", r.body)
	}
	check(t, h.do("GET", "/api/v1/archive/channels", "", bearer(readKey)...), 200, "", chv.ID, *chv.Address)
	if r := h.do("GET", "/api/v1/archive/channels", "", bearer(keyB)...); r.code != 200 || bytes.Contains(r.body, []byte(chv.ID)) {
		t.Fatalf("tenant B's channels: %d %s", r.code, r.body)
	}
	check(t, h.do("GET", "/api/v1/archive/channels?tenantId="+tenant, "", bearer(keyB)...), 404, "not_found")
	check(t, h.do("DELETE", "/api/v1/archive/channels/"+chv.ID, "", bearer(readKey)...), 401, "unauthorized")
	check(t, h.do("DELETE", "/api/v1/archive/channels/"+chv.ID, "", bs...), 404, "not_found")
	// A second channel, deleted by its tenant's administrator.
	r = h.do("POST", "/api/v1/archive/channels", `{"kind":"smtp_journal"}`, as...)
	check(t, r, 201, "")
	gone := r.json()["id"].(string)
	check(t, h.do("DELETE", "/api/v1/archive/channels/"+gone, "", as...), 204, "")

	// Ingest three messages; the checkpointer signs within CheckpointEvery.
	ch, err := svc.Channel(ctx, chv.ID)
	if err != nil {
		t.Fatal(err)
	}
	var raws [][]byte
	var msgs []*archive.Message
	ingest := func(n int) {
		t.Helper()
		for range n {
			raw := archiveMail("carol@example.com", "quarterly report", "numbers "+app.RandomToken(8))
			m, err := svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			raws, msgs = append(raws, raw), append(msgs, m)
		}
	}
	ingest(3)
	cv = waitChain(t, h, readKey, 3)
	if cv.Size != 3 || cv.State != "ok" || cv.RootHash == "" || cv.CheckpointAt == nil || cv.VerifierKey != signer.VerifierKey() {
		t.Fatalf("chain after 3 messages %+v", cv)
	}
	r = h.do("GET", "/api/v1/archive/status", "", bearer(readKey)...)
	check(t, r, 200, "", `"messages":3`, `"size":3`, `"state":"ok"`, chv.ID)
	if s := archiveState(); s != "unverified" {
		t.Fatalf("status archive.chainState %q, want unverified", s)
	}

	// The checkpoint: text/plain, a signed note under the verifier key.
	r = h.do("GET", "/api/v1/archive/chain/checkpoint", "", bearer(readKey)...)
	check(t, r, 200, "")
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("checkpoint Content-Type %q", ct)
	}
	cp3, err := chain.OpenCheckpoint(string(r.body), cv.VerifierKey, origin)
	if err != nil {
		t.Fatalf("checkpoint %q: %v", r.body, err)
	}
	if cp3.Size != 3 || base64.StdEncoding.EncodeToString(cp3.Root[:]) != cv.RootHash {
		t.Fatalf("checkpoint size %d root %x, chain %+v", cp3.Size, cp3.Root, cv)
	}
	if _, err := chain.OpenCheckpoint(string(r.body), cv.VerifierKey, "backstop.test/archive/"+h.tenantB.ID); err == nil {
		t.Fatal("tenant A's checkpoint opened under tenant B's origin")
	}

	// Records: with proof=true an inclusion proof against the checkpoint.
	for i := range int64(3) {
		r = h.do("GET", "/api/v1/archive/records/"+strconv.FormatInt(i, 10)+"?proof=true", "", bearer(readKey)...)
		check(t, r, 200, "")
		var rp archive.RecordProof
		json.Unmarshal(r.body, &rp)
		rec, err := chain.ParseRecord([]byte(rp.Record))
		if err != nil || rec.Tenant != tenant || rec.Message != msgs[i].ID || rec.SHA256 != msgs[i].SHA256 {
			t.Fatalf("record %d: %+v, %v", i, rec, err)
		}
		leaf := tlog.RecordHash([]byte(rp.Record))
		if rp.Index != i || rp.LeafHash != base64.StdEncoding.EncodeToString(leaf[:]) {
			t.Fatalf("record %d: index %d leafHash %s", i, rp.Index, rp.LeafHash)
		}
		cp, err := chain.OpenCheckpoint(rp.Checkpoint, cv.VerifierKey, origin)
		if err != nil {
			t.Fatalf("record %d's checkpoint: %v", i, err)
		}
		if err := tlog.CheckRecord(tlog.RecordProof(b64Hashes(t, rp.Proof)), cp.Size, cp.Root, i, leaf); err != nil {
			t.Fatalf("record %d's inclusion proof: %v", i, err)
		}
		if err := tlog.CheckRecord(tlog.RecordProof(b64Hashes(t, rp.Proof)), cp.Size, cp.Root, (i+1)%3, leaf); err == nil {
			t.Fatalf("record %d's proof verifies at another index", i)
		}
	}
	r = h.do("GET", "/api/v1/archive/records/1", "", bearer(readKey)...)
	check(t, r, 200, "", `"index":1`)
	if m := r.json(); m["proof"] != nil || m["checkpoint"] != nil {
		t.Fatalf("record without proof=true: %s", r.body)
	}
	check(t, h.do("GET", "/api/v1/archive/records/3", "", bearer(readKey)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/records/-1", "", bearer(readKey)...), 422, "validation_failed")

	// Tenant isolation: tenant B sees none of it.
	check(t, h.do("GET", "/api/v1/archive/records/0", "", bearer(keyB)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/records/0?tenantId="+tenant, "", bearer(keyB)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/chain?tenantId="+tenant, "", bearer(keyB)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/chain/checkpoint?tenantId="+tenant, "", bearer(keyB)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/status?tenantId="+tenant, "", bearer(keyB)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/chain/consistency?from=1&to=3&tenantId="+tenant, "", bearer(keyB)...), 404, "not_found")
	check(t, h.do("POST", "/api/v1/archive/chain/verify", `{"tenantId":"`+tenant+`"}`, bearer(keyB)...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/chain", "", bearer(keyB)...), 200, "", `"state":"empty"`, `"size":0`)
	// A provider key names the tenant (tenantId was once not read on the
	// records and consistency routes: "name the tenant").
	provKey, _ := h.key("", app.ScopeArchiveRead)
	check(t, h.do("GET", "/api/v1/archive/records/2?tenantId="+tenant, "", bearer(provKey)...), 200, "", `"index":2`, msgs[2].ID)
	check(t, h.do("GET", "/api/v1/archive/chain/consistency?from=1&to=3&tenantId="+tenant, "", bearer(provKey)...), 200, "", `"to":3`)
	check(t, h.do("GET", "/api/v1/archive/records/0", "", append(bearer(provKey), "X-Service-Tenant", tenant)...), 200, "", msgs[0].ID)
	check(t, h.do("GET", "/api/v1/archive/records/0", "", bearer(provKey)...), 422, "validation_failed")

	// Two more, a second checkpoint, and a consistency proof between them.
	ingest(2)
	cv5 := waitChain(t, h, readKey, 5)
	r = h.do("GET", "/api/v1/archive/chain/checkpoint", "", bearer(readKey)...)
	check(t, r, 200, "")
	cp5, err := chain.OpenCheckpoint(string(r.body), cv.VerifierKey, origin)
	if err != nil || cp5.Size != 5 || base64.StdEncoding.EncodeToString(cp5.Root[:]) != cv5.RootHash {
		t.Fatalf("second checkpoint %+v, %v (chain %+v)", cp5, err, cv5)
	}
	r = h.do("GET", "/api/v1/archive/chain/consistency?from=3&to=5", "", bearer(readKey)...)
	check(t, r, 200, "", `"from":3`, `"to":5`)
	var cons archive.Consistency
	json.Unmarshal(r.body, &cons)
	if err := tlog.CheckTree(b64Hashes(t, cons.Proof), cp5.Size, cp5.Root, cp3.Size, cp3.Root); err != nil {
		t.Fatalf("consistency proof 3 -> 5: %v", err)
	}
	if err := tlog.CheckTree(b64Hashes(t, cons.Proof), cp5.Size, cp5.Root, cp3.Size, cp5.Root); err == nil {
		t.Fatal("the consistency proof verifies against another old root")
	}
	check(t, h.do("GET", "/api/v1/archive/chain/consistency?from=5&to=5", "", bearer(readKey)...), 200, "", `"proof":[]`)
	for _, q := range []string{"from=0&to=5", "from=4&to=3", "from=1&to=6", "from=-1&to=2", "to=5", ""} {
		check(t, h.do("GET", "/api/v1/archive/chain/consistency?"+q, "", bearer(readKey)...), 422, "validation_failed")
	}

	// Verification: 202 with a job that succeeds.
	r = h.do("POST", "/api/v1/archive/chain/verify", "", bearer(readKey)...)
	check(t, r, 202, "", `"queue":"archive_verify"`, `"type":"archive"`, `"id":"`+tenant+`"`)
	j := waitJob(t, h, readKey, r.json()["id"].(string))
	if j["state"] != "succeeded" {
		t.Fatalf("verify job %v", j)
	}
	check(t, h.do("GET", "/api/v1/archive/chain", "", bearer(readKey)...), 200, "", `"state":"ok"`)
	if r := h.do("GET", "/api/v1/archive/chain", "", bearer(readKey)...); r.json()["lastVerifiedAt"] == nil {
		t.Fatalf("no lastVerifiedAt after a verification: %s", r.body)
	}
	if s := archiveState(); s != "intact" {
		t.Fatalf("status archive.chainState %q, want intact", s)
	}

	// Corrupt one stored message (same length, one byte changed): the
	// next verification fails and the chain is broken.
	corruptArchiveMessage(t, h, raws[1], msgs[1])
	r = h.do("POST", "/api/v1/archive/chain/verify", "", as...)
	check(t, r, 202, "")
	j = waitJob(t, h, readKey, r.json()["id"].(string))
	f, _ := j["failure"].(map[string]any)
	if j["state"] != "failed" || f == nil || (f["code"] != app.CodeArchiveChainBroken && f["code"] != app.CodeArchiveMessageMismatch) {
		t.Fatalf("verify job after corruption %v", j)
	}
	check(t, h.do("GET", "/api/v1/archive/chain", "", bearer(readKey)...), 200, "", `"state":"broken"`)
	check(t, h.do("GET", "/api/v1/archive/status", "", bearer(readKey)...), 200, "", `"state":"broken"`)
	if s := archiveState(); s != "broken" {
		t.Fatalf("status archive.chainState %q, want broken", s)
	}
	// Tenant B's chain is untouched.
	check(t, h.do("GET", "/api/v1/archive/chain", "", bearer(keyB)...), 200, "", `"state":"empty"`)
}

// corruptArchiveMessage flips a byte of the message's stored copy: the
// spool file holding exactly raw (found by content, whatever the spool
// layout), else its record row.
func corruptArchiveMessage(t *testing.T, h *harness, raw []byte, m *archive.Message) {
	t.Helper()
	found := ""
	filepath.WalkDir(filepath.Join(h.dataDir, "archive"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() != int64(len(raw)) {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, raw) {
			found = p
		}
		return nil
	})
	if found != "" {
		bad := bytes.Replace(raw, []byte("numbers"), []byte("Numbers"), 1)
		os.Chmod(found, 0o600)
		if err := os.WriteFile(found, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Logf("no spool file of message %s; corrupting its record row", m.ID)
	if err := h.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE archive_records SET record = CAST(replace(CAST(record AS TEXT), ?, ?) AS BLOB) WHERE message_id = ?`,
			m.SHA256, strings.Repeat("0", 64), m.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
