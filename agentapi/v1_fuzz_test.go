package agentapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"backstop/agentapi"
	"backstop/agentapi/wire"
	"backstop/app"
	"backstop/store/storetest"
)

// FuzzAgentRequests sends arbitrary bodies to every /agent/v1 operation an
// enrolled agent may call, and to enroll: an agent on a customer's machine is
// outside input. No body may cause a 5xx or a panic.
//
//	go test -run '^$' -fuzz FuzzAgentRequests ./agentapi/
func FuzzAgentRequests(f *testing.F) {
	ctx := context.Background()
	dir := f.TempDir()
	db := storetest.Open(f, dir)
	tenant := storetest.Tenant(f, db, "Fuzz")
	srv := httptest.NewServer(agentapi.New(agentapi.Services{Endpoints: db, Enrollment: db, Agents: db, Jobs: db},
		agentapi.Options{DataDir: dir}))
	f.Cleanup(srv.Close)

	value, tok := app.NewEnrollmentToken(tenant, app.ProfileServer, time.Now())
	if err := db.CreateEnrollmentToken(ctx, tok); err != nil {
		f.Fatal(err)
	}
	body, _ := json.Marshal(wire.EnrollRequest{Token: value, Hostname: "fuzz", OS: "linux", Arch: "amd64", AgentVersion: "1.0.0"})
	resp, err := http.Post(srv.URL+"/agent/v1/enroll", "application/json", bytes.NewReader(body))
	if err != nil {
		f.Fatal(err)
	}
	var enrolled wire.EnrollResponse
	json.NewDecoder(resp.Body).Decode(&enrolled)
	resp.Body.Close()
	if enrolled.Secret == "" {
		f.Fatalf("enroll: %d", resp.StatusCode)
	}
	auth := wire.AuthScheme + " " + enrolled.EndpointID + ":" + enrolled.Secret

	paths := []string{"/agent/v1/enroll", "/agent/v1/heartbeat", "/agent/v1/runs",
		"/agent/v1/runs/run_0123456789abcdef0123456789abcdef/progress", "/agent/v1/runs/run_0123456789abcdef0123456789abcdef/finish"}
	for i, seed := range []string{
		`{"token":"bse_x","hostname":"h","os":"linux","arch":"amd64","agentVersion":"1"}`,
		`{"agentVersion":"1.0.0","os":"linux","arch":"amd64"}`,
		`{"runId":"run_0123456789abcdef0123456789abcdef","kind":"backup","trigger":"schedule","startedAt":"2026-11-21T10:00:00Z"}`,
		`{"phase":"uploading","percent":1e308,"filesDone":-1}`,
		`{"state":"failed","failure":{"code":"\u0000","message":"` + string(bytes.Repeat([]byte("x"), 300)) + `"},"samples":[{"path":"../../etc","size":-5,"sha256":"zz"}]}`,
		`{"state":"succeeded","snapshotId":"` + string(bytes.Repeat([]byte("a"), 64)) + `","startedAt":"0001-01-01T00:00:00Z"}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add(uint8(i%len(paths)), []byte(seed))
	}
	client := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if path != "/agent/v1/enroll" {
			req.Header.Set("Authorization", auth)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("POST %s with %q took %s", path, body, d)
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("POST %s with %q: %d", path, body, resp.StatusCode)
		}
	})
}
