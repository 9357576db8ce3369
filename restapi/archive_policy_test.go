package restapi

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/archive/chain"
)

// archiveHarness is a provider-edition harness with a running archive
// service (real store, spool, signer; checkpoints every 20 ms).
func archiveHarness(t *testing.T) (*harness, *archive.Service, *chain.Signer) {
	h := newHarness(t, app.EditionProvider, nil)
	signer, err := chain.LoadOrCreateSigner(filepath.Join(h.dataDir, "archive.key"), "backstop.test")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := archive.New(archive.Config{Store: h.db, DataDir: h.dataDir, Signer: signer,
		Origin: func(id string) string { return "backstop.test/archive/" + id }, CheckpointEvery: 20 * time.Millisecond, SMTPDomain: "journal.test",
		Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	h.srv.Archive = svc
	return h, svc, signer
}

func archiveMail(to, subject, body string) []byte {
	return []byte(fmt.Sprintf("From: alice@example.com\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%d@example.com>\r\n\r\n%s\r\n",
		to, subject, time.Now().UnixNano(), body))
}

func TestArchivePolicyRoutes(t *testing.T) {
	h, svc, signer := archiveHarness(t)
	ctx := context.Background()
	tenant := h.tenantA.ID
	h.user("admin@a.test", "pw-a", tenant)
	h.user("admin@b.test", "pw-b", h.tenantB.ID)
	cookie, csrf := h.session("admin@a.test", "pw-a")
	as := []any{cookie, "X-CSRF-Token", csrf}
	cookieB, csrfB := h.session("admin@b.test", "pw-b")
	bs := []any{cookieB, "X-CSRF-Token", csrfB}
	readKey, _ := h.key(tenant, app.ScopeArchiveRead)
	otherKey, _ := h.key(tenant, app.ScopeStatusRead)

	ch, err := svc.CreateChannel(ctx, archive.ChannelSpec{TenantID: tenant, Kind: archive.KindSMTPJournal, DisplayName: "x"})
	if err != nil {
		t.Fatal(err)
	}
	heldRaw := archiveMail("carol@example.com", "contract", "the signed contract")
	held, err := svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(heldRaw))
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(archiveMail("dave@example.com", "lunch", "sandwich")))
	if err != nil {
		t.Fatal(err)
	}

	// Retention: session only, validated.
	check(t, h.do("GET", "/api/v1/archive/retention", "", bearer(readKey)...), 401, "unauthorized")
	check(t, h.do("GET", "/api/v1/archive/retention", "", as...), 200, "", `"defaultDays":2557`, `"isDefault":true`)
	check(t, h.do("PUT", "/api/v1/archive/retention", `{"defaultDays":-1,"rules":[]}`, as...), 422, "validation_failed")
	check(t, h.do("PUT", "/api/v1/archive/retention", `{"defaultDays":0,"rules":[{"match":{},"days":3}]}`, as...), 422, "validation_failed")
	check(t, h.do("PUT", "/api/v1/archive/retention", `{"defaultDays":0,"rules":[],"extra":1}`, as...), 422, "validation_failed")
	check(t, h.do("PUT", "/api/v1/archive/retention", `{"defaultDays":0,"rules":[{"match":{"subjectContains":"x"},"days":30}]}`, as...),
		200, "", `"defaultDays":0`, `"isDefault":false`)
	check(t, h.do("GET", "/api/v1/archive/retention?tenantId="+tenant, "", bs...), 404, "not_found")

	// Holds: created and released by session, listed with archive:read.
	check(t, h.do("POST", "/api/v1/archive/holds", `{"name":"Matter 7","custodians":["carol@example.com"]}`, bearer(readKey)...), 401, "unauthorized")
	check(t, h.do("POST", "/api/v1/archive/holds", `{"name":"x","custodians":["nobody"]}`, as...), 422, "validation_failed")
	r := h.do("POST", "/api/v1/archive/holds", `{"name":"Matter 7","matter":"M-7","custodians":["carol@example.com"]}`, as...)
	check(t, r, 201, "", `"active":true`, `"recordIndex":2`)
	holdID := r.json()["id"].(string)
	check(t, h.do("GET", "/api/v1/archive/holds", "", bearer(otherKey)...), 403, "insufficient_scope")
	check(t, h.do("GET", "/api/v1/archive/holds", "", bearer(readKey)...), 200, "", holdID, `"nextCursor":null`)
	keyB, _ := h.key(h.tenantB.ID, app.ScopeArchiveRead)
	if r := h.do("GET", "/api/v1/archive/holds", "", bearer(keyB)...); bytes.Contains(r.body, []byte(holdID)) {
		t.Fatal("another tenant's key lists the hold")
	}

	// Purge: the held message stays readable, the other is gone (410).
	if sum, err := svc.Purge(ctx, tenant); err != nil || sum.Purged != 1 || sum.Held != 1 {
		t.Fatalf("purge = %+v, %v", sum, err)
	}
	r = h.do("GET", "/api/v1/archive/messages/"+held.ID+"/content", "", as...)
	check(t, r, 200, "")
	if !bytes.Equal(r.body, heldRaw) || r.header.Get("Content-Type") != "message/rfc822" {
		t.Fatalf("content %q (%s)", r.body, r.header.Get("Content-Type"))
	}
	if rows := h.auditRows(1); rows[0].Action != "archiveMessages.content" || rows[0].TenantID != tenant || rows[0].Status != 200 {
		t.Fatalf("audit row %+v", rows[0])
	}
	check(t, h.do("GET", "/api/v1/archive/messages/"+other.ID+"/content", "", as...), 410, "gone")
	check(t, h.do("GET", "/api/v1/archive/messages/"+held.ID+"/content", "", bs...), 404, "not_found")
	check(t, h.do("GET", "/api/v1/archive/messages/"+held.ID, "", as...), 200, "", `"held":true`, `"purged":false`)
	check(t, h.do("GET", "/api/v1/archive/messages/"+other.ID, "", as...), 200, "", `"purged":true`)

	// Search.
	check(t, h.do("GET", "/api/v1/archive/messages?q=contract", "", bearer(readKey)...), 401, "unauthorized")
	r = h.do("GET", "/api/v1/archive/messages?q=contract&from=2020-01-01", "", as...)
	check(t, r, 200, "", held.ID, `"held":true`)
	check(t, h.do("GET", "/api/v1/archive/messages?q=%22%20OR%20x", "", as...), 200, "", `"items":[]`)
	check(t, h.do("GET", "/api/v1/archive/messages?from=yesterday", "", as...), 422, "validation_failed")
	check(t, h.do("GET", "/api/v1/archive/messages?q=contract", "", bs...), 200, "", `"items":[]`)

	// Release: a reason is required; another tenant's admin gets 404.
	check(t, h.do("POST", "/api/v1/archive/holds/"+holdID+"/release", `{"reason":""}`, as...), 422, "validation_failed")
	check(t, h.do("POST", "/api/v1/archive/holds/"+holdID+"/release", `{"reason":"x"}`, bs...), 404, "not_found")
	check(t, h.do("POST", "/api/v1/archive/holds/"+holdID+"/release", `{"reason":"matter closed"}`, as...), 200, "",
		`"active":false`, `"releaseReason":"matter closed"`)
	check(t, h.do("POST", "/api/v1/archive/holds/"+holdID+"/release", `{"reason":"again"}`, as...), 409, "conflict")

	// Export: a zip of the result set's .eml files and evidence.json.
	waitCheckpoint(t, h, tenant)
	r = h.do("POST", "/api/v1/archive/exports", `{"q":"contract"}`, as...)
	check(t, r, 200, "")
	if r.header.Get("Content-Type") != "application/zip" {
		t.Fatalf("export type %s", r.header.Get("Content-Type"))
	}
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
	}
	if len(names) != 2 || !names["messages/"+held.SHA256+".eml"] || !names["evidence.json"] {
		t.Fatalf("zip holds %v", names)
	}

	// Evidence: archive:read, JSON that verifies offline.
	check(t, h.do("GET", "/api/v1/archive/evidence?from=2020-01-01&to=2099-12-31", "", bearer(otherKey)...), 403, "insufficient_scope")
	check(t, h.do("GET", "/api/v1/archive/evidence?from=2020-01-01&to=bad", "", bearer(readKey)...), 422, "validation_failed")
	r = h.do("GET", "/api/v1/archive/evidence?from=2020-01-01&to=2099-12-31", "", bearer(readKey)...)
	check(t, r, 200, "", `"schema": "backstop.evidence/v1"`)
	if _, err := chain.VerifyEvidence(r.body, signer.VerifierKey(), ""); err != nil {
		t.Fatalf("evidence does not verify: %v", err)
	}
	var e chain.Evidence
	json.Unmarshal(r.body, &e)
	if e.TenantID != tenant || e.Counts.Messages != 2 || e.Counts.Tombstones != 1 || e.Counts.Holds != 1 || len(e.Holds) != 1 {
		t.Fatalf("evidence %+v", e.Counts)
	}
	for _, pdf := range []*response{
		h.do("GET", "/api/v1/archive/evidence?from=2020-01-01&to=2099-12-31&format=pdf", "", bearer(readKey)...),
		h.do("GET", "/api/v1/archive/evidence?from=2020-01-01&to=2099-12-31", "", append(bearer(readKey), "Accept", "application/pdf")...),
	} {
		check(t, pdf, 200, "")
		if pdf.header.Get("Content-Type") != "application/pdf" || !bytes.HasPrefix(pdf.body, []byte("%PDF-")) {
			t.Fatalf("pdf: %s %.20q", pdf.header.Get("Content-Type"), pdf.body)
		}
	}
	provKey, _ := h.key("", app.ScopeArchiveRead)
	check(t, h.do("GET", "/api/v1/archive/evidence?from=2020-01-01&to=2099-12-31", "", bearer(provKey)...), 422, "validation_failed")
	check(t, h.do("GET", "/api/v1/archive/evidence?from=2020-01-01&to=2099-12-31", "", append(bearer(provKey), "X-Service-Tenant", tenant)...),
		200, "", tenant)
}

func waitCheckpoint(t *testing.T, h *harness, tenant string) {
	t.Helper()
	ctx := context.Background()
	for range 500 {
		n, _ := h.db.ArchiveSize(ctx, tenant)
		if cp, err := h.db.LatestArchiveCheckpoint(ctx, tenant); err == nil && cp.Size == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no checkpoint covers the log")
}
