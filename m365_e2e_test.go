package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"backstop/app/graph/graphtest"
)

// TestM365EndToEnd runs serve with the real Microsoft 365 engine against
// the fake Graph: a source added over the web session, its directory synced
// (202 with the job), the user's objects protected and backed up through
// the API in their own queues.
func TestM365EndToEnd(t *testing.T) {
	tenant := graphtest.Tenant{AzureTenantID: "3f2e1d0c-9b8a-4766-8554-433221100fed", ClientID: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
		ClientSecret: "e2e-client-secret-value"}
	fg := graphtest.New(tenant, graphtest.Options{})
	t.Cleanup(fg.Close)
	alice := fg.AddUser(graphtest.User{DisplayName: "Alice", UserPrincipalName: "alice@contoso.example", Mail: "alice@contoso.example",
		Licenses: []string{fg.Sku("SPE_E3")}})
	fg.AddMessage(alice, fg.WellKnownFolder(alice, "inbox"), []byte("From: bob@example.com\r\nSubject: Hi\r\n\r\nHello.\r\n"), time.Now().Add(-time.Hour))
	fg.AddFile(alice, "notes.txt", []byte("notes"))

	a := startAppliance(t, map[string]string{"SERVICE_GRAPH_MAX_CONCURRENCY": "8"})
	acme := a.admin("", "create-tenant", "--name", "Acme")
	a.admin("root-password-123\n", "create-user", "--email", "root@example.com", "--password-stdin")
	key := a.admin("", "create-key", "--tenant", acme, "--name", "PSA", "--scopes", "users:read,users:write,jobs:read,items:read,restore:write")
	auth := []string{"Authorization", "Bearer " + key}
	r := a.call("POST", "/api/v1/session", `{"email":"root@example.com","password":"root-password-123"}`)
	a.expect(r, 200, "")
	var s struct{ CSRFToken string }
	json.Unmarshal(r.body, &s)
	sess := []string{"Cookie", strings.SplitN(r.header.Get("Set-Cookie"), ";", 2)[0], "X-CSRF-Token", s.CSRFToken}

	body := `{"kind":"m365","tenantId":"` + acme + `","azureTenantId":"` + tenant.AzureTenantID + `","clientId":"` + tenant.ClientID +
		`","graphUrl":"` + fg.GraphURL() + `","loginUrl":"` + fg.LoginURL() + `","clientSecret":"%s"}`
	r = a.call("POST", "/api/v1/sources", strings.Replace(body, "%s", "not-the-secret", 1), sess...)
	a.expect(r, 422, "source_auth_failed")
	if !bytes.Contains(r.body, []byte("AADSTS")) {
		t.Fatalf("refused secret: %s", r.body)
	}
	r = a.call("POST", "/api/v1/sources", strings.Replace(body, "%s", tenant.ClientSecret, 1), sess...)
	a.expect(r, 201, "")
	if bytes.Contains(r.body, []byte(tenant.ClientSecret)) {
		t.Fatalf("the secret is shown: %s", r.body)
	}
	var src struct{ ID string }
	json.Unmarshal(r.body, &src)
	r = a.call("POST", "/api/v1/sources/"+src.ID+"/sync", "", sess...)
	a.expect(r, 202, "")
	var job struct{ ID, Queue string }
	json.Unmarshal(r.body, &job)
	if job.Queue != "directory_sync" {
		t.Fatalf("sync job %s", r.body)
	}
	wait := func(id string) map[string]any {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			r := a.call("GET", "/api/v1/jobs/"+id, "", auth...)
			var j map[string]any
			json.Unmarshal(r.body, &j)
			switch j["state"] {
			case "succeeded", "partial", "failed", "cancelled", "interrupted":
				return j
			}
		}
		t.Fatalf("job %s did not end", id)
		return nil
	}
	if j := wait(job.ID); j["state"] != "succeeded" {
		t.Fatalf("sync %v", j)
	}
	r = a.call("GET", "/api/v1/directory?q=alice", "", auth...)
	a.expect(r, 200, "")
	var dir struct {
		Items []struct {
			Protected          bool
			ProtectedObjectIDs []string
		}
	}
	json.Unmarshal(r.body, &dir)
	if len(dir.Items) != 1 || !dir.Items[0].Protected || len(dir.Items[0].ProtectedObjectIDs) != 2 {
		t.Fatalf("directory %s", r.body)
	}
	queues := map[string]bool{}
	for _, id := range dir.Items[0].ProtectedObjectIDs {
		r := a.call("POST", "/api/v1/backups", `{"targetType":"protected_object","targetId":"`+id+`"}`, auth...)
		a.expect(r, 202, "")
		var j struct{ ID, Queue string }
		json.Unmarshal(r.body, &j)
		queues[j.Queue] = true
		if end := wait(j.ID); end["state"] != "succeeded" {
			t.Fatalf("backup %v", end)
		}
	}
	if !queues["mailbox_backup"] || !queues["drive_backup"] {
		t.Fatalf("queues %v", queues)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	r = a.call("GET", "/api/v1/directory/summary?from="+today+"&to="+today, "", auth...)
	a.expect(r, 200, "")
	if !bytes.Contains(r.body, []byte(`"protectedMailboxes":1`)) || !bytes.Contains(r.body, []byte(`"daily":[`)) {
		t.Fatalf("summary %s", r.body)
	}
}
