package restapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/retention"
)

// retentionHarness is the API over a real database with a job runner that
// knows the retention kind. The runner is not opened, so submitted jobs
// stay queued for the test to look at.
func retentionHarness(t *testing.T) (*harness, *jobs.Runner) {
	t.Helper()
	h := newHarness(t, app.EditionProvider, nil)
	h.srv.Retention = h.db
	runner := jobs.New(jobs.Config{Store: h.db, Logger: discardLogger()})
	runner.Register(retention.New(retention.Config{Tenants: h.db, Endpoints: h.db, Policies: h.db, Logger: discardLogger()}).Kind())
	h.srv.JobStore, h.srv.JobRunner, h.srv.JobFeed = h.db, runner, runner.Broker()
	return h, runner
}

func TestRetentionRoutes(t *testing.T) {
	h, _ := retentionHarness(t)
	h.user("admin@acme.test", "correct horse battery", h.tenantA.ID)
	h.user("provider@example.com", "correct horse battery", "")
	cookie, csrf := h.session("admin@acme.test", "correct horse battery")
	tenantAdmin := []any{cookie, "X-CSRF-Token", csrf}
	pc, pcsrf := h.session("provider@example.com", "correct horse battery")
	provider := []any{pc, "X-CSRF-Token", pcsrf}
	epA := h.endpoint(h.tenantA.ID, "a1", app.ProfileServer)
	epB := h.endpoint(h.tenantB.ID, "b1", app.ProfileServer)
	key, _ := h.key(h.tenantA.ID, app.AllScopes...)
	qA, qB := "?tenantId="+h.tenantA.ID, "?tenantId="+h.tenantB.ID
	custom := `{"keepAllDays":7,"keepDailyDays":30,"keepWeeklyDays":0,"keepMonthlyDays":365}`

	t.Run("API keys get 401 on every route", func(t *testing.T) {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/v1/retention" + qA, ""},
			{"PUT", "/api/v1/retention" + qA, custom},
			{"GET", "/api/v1/endpoints/" + epA.ID + "/retention", ""},
			{"PUT", "/api/v1/endpoints/" + epA.ID + "/retention", `{"policy":null}`},
			{"POST", "/api/v1/retention/run", `{"tenantId":"` + h.tenantA.ID + `"}`},
		} {
			check(t, h.do(c.method, c.path, c.body, bearer(key)...), 401, app.EUNAUTHORIZED)
		}
	})

	t.Run("default until saved, then the round trip", func(t *testing.T) {
		r := h.do("GET", "/api/v1/retention", "", tenantAdmin...) // own tenant when omitted
		check(t, r, 200, "", `"isDefault":true`, `"keepAllDays":30`, `"keepDailyDays":90`, `"keepWeeklyDays":365`, `"keepMonthlyDays":2557`)
		if r.json()["tenantId"] != h.tenantA.ID {
			t.Fatalf("tenant %v", r.json()["tenantId"])
		}
		before := h.auditCount()
		check(t, h.do("PUT", "/api/v1/retention"+qA, custom, tenantAdmin...), 200, "", `"isDefault":false`, `"keepAllDays":7`)
		rows := h.auditRows(1)
		if h.auditCount() != before+1 || rows[0].Action != "retention.update" || rows[0].TenantID != h.tenantA.ID || rows[0].Status != 200 {
			t.Fatalf("audit row %+v", rows[0])
		}
		var got struct {
			TenantID  string              `json:"tenantId"`
			Policy    app.RetentionPolicy `json:"policy"`
			IsDefault bool                `json:"isDefault"`
		}
		json.Unmarshal(h.do("GET", "/api/v1/retention"+qA, "", tenantAdmin...).body, &got)
		if got.IsDefault || got.Policy != (app.RetentionPolicy{KeepAllDays: 7, KeepDailyDays: 30, KeepMonthlyDays: 365}) {
			t.Fatalf("read back %+v", got)
		}
		// The provider sees it too, and tenant B still has the default.
		check(t, h.do("GET", "/api/v1/retention"+qA, "", provider...), 200, "", `"keepAllDays":7`)
		check(t, h.do("GET", "/api/v1/retention"+qB, "", provider...), 200, "", `"isDefault":true`)
		rows = h.auditRows(1)
		if rows[0].Action != "retention.get" || rows[0].TenantID != h.tenantB.ID {
			t.Fatalf("provider read audited as %+v", rows[0])
		}
	})

	t.Run("tenant administrators cannot reach another tenant", func(t *testing.T) {
		check(t, h.do("GET", "/api/v1/retention"+qB, "", tenantAdmin...), 404, app.ENOTFOUND)
		check(t, h.do("PUT", "/api/v1/retention"+qB, custom, tenantAdmin...), 404, app.ENOTFOUND)
		check(t, h.do("GET", "/api/v1/endpoints/"+epB.ID+"/retention", "", tenantAdmin...), 404, app.ENOTFOUND)
		check(t, h.do("PUT", "/api/v1/endpoints/"+epB.ID+"/retention", `{"policy":null}`, tenantAdmin...), 404, app.ENOTFOUND)
		check(t, h.do("POST", "/api/v1/retention/run", `{"tenantId":"`+h.tenantB.ID+`"}`, tenantAdmin...), 404, app.ENOTFOUND)
		check(t, h.do("GET", "/api/v1/retention?tenantId=tn_missing", "", provider...), 404, app.ENOTFOUND)
		check(t, h.do("GET", "/api/v1/retention", "", provider...), 422, app.EINVALID, "query.tenantId")
	})

	t.Run("strict bodies and validated tiers", func(t *testing.T) {
		for _, c := range []struct{ method, path, body, field string }{
			{"PUT", "/api/v1/retention" + qA, `{"keepAllDays":7,"keepDailyDays":30,"keepWeeklyDays":0,"keepMonthlyDays":365,"keepYearlyDays":9}`, "keepYearlyDays"},
			{"PUT", "/api/v1/retention" + qA, `{"keepAllDays":7}`, "keepDailyDays"},
			{"PUT", "/api/v1/retention" + qA, `{"keepAllDays":-1,"keepDailyDays":30,"keepWeeklyDays":0,"keepMonthlyDays":365}`, "body.keepAllDays"},
			{"PUT", "/api/v1/retention" + qA, `{"keepAllDays":30,"keepDailyDays":10,"keepWeeklyDays":0,"keepMonthlyDays":365}`, "body.keepDailyDays"},
			{"PUT", "/api/v1/endpoints/" + epA.ID + "/retention", `{}`, "policy"},
			{"PUT", "/api/v1/endpoints/" + epA.ID + "/retention", `{"policy":null,"extra":1}`, "extra"},
			{"PUT", "/api/v1/endpoints/" + epA.ID + "/retention", `{"policy":{"keepAllDays":7,"keepDailyDays":30,"keepWeeklyDays":0,"keepMonthlyDays":365,"x":1}}`, "x"},
			{"PUT", "/api/v1/endpoints/" + epA.ID + "/retention", `{"policy":{"keepAllDays":90,"keepDailyDays":30,"keepWeeklyDays":0,"keepMonthlyDays":365}}`, "body.policy.keepDailyDays"},
			{"POST", "/api/v1/retention/run", `{"tenantId":"` + h.tenantA.ID + `","now":true}`, "now"},
		} {
			r := h.do(c.method, c.path, c.body, tenantAdmin...)
			check(t, r, 422, app.EINVALID, c.field)
		}
		check(t, h.do("PUT", "/api/v1/retention"+qA, `{"keepAllDays":`, tenantAdmin...), 400, "bad_request")
	})

	t.Run("endpoint override and inheritance", func(t *testing.T) {
		r := h.do("GET", "/api/v1/endpoints/"+epA.ID+"/retention", "", tenantAdmin...)
		check(t, r, 200, "", `"inherited":true`, `"keepAllDays":7`, `"endpointId":"`+epA.ID+`"`, `"lastPrune":null`) // the tenant's, saved above
		at := app.At(time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC))
		if err := h.db.RecordEndpointPrune(context.Background(), epA.ID, app.EndpointPrune{JobID: "job_1", At: at, BytesBefore: 3000,
			BytesAfter: 1000, SnapshotsRemoved: 4, SnapshotsKept: 9}); err != nil {
			t.Fatal(err)
		}
		check(t, h.do("GET", "/api/v1/endpoints/"+epA.ID+"/retention", "", tenantAdmin...), 200, "",
			`"lastPrune":{"jobId":"job_1","at":"2026-11-20T03:00:00.000Z","bytesBefore":3000,"bytesAfter":1000,"snapshotsRemoved":4,"snapshotsKept":9,"failed":false}`)
		r = h.do("PUT", "/api/v1/endpoints/"+epA.ID+"/retention", `{"policy":{"keepAllDays":1,"keepDailyDays":0,"keepWeeklyDays":0,"keepMonthlyDays":0}}`, tenantAdmin...)
		check(t, r, 200, "", `"inherited":false`, `"keepAllDays":1`)
		if rows := h.auditRows(1); rows[0].Action != "retention.updateEndpoint" || rows[0].Target != "/api/v1/endpoints/"+epA.ID+"/retention" {
			t.Fatalf("audit row %+v", rows[0])
		}
		check(t, h.do("GET", "/api/v1/endpoints/"+epA.ID+"/retention", "", provider...), 200, "", `"inherited":false`, `"keepAllDays":1`)
		check(t, h.do("PUT", "/api/v1/endpoints/"+epA.ID+"/retention", `{"policy":null}`, tenantAdmin...), 200, "", `"inherited":true`, `"keepAllDays":7`)
		check(t, h.do("GET", "/api/v1/endpoints/ep_missing/retention", "", provider...), 404, app.ENOTFOUND)
	})

	t.Run("run answers 202 with the queued job", func(t *testing.T) {
		r := h.do("POST", "/api/v1/retention/run", `{"tenantId":"`+h.tenantA.ID+`"}`, tenantAdmin...)
		check(t, r, 202, "", `"queue":"retention"`, `"state":"queued"`, `"trigger":"web"`)
		var j app.Job
		json.Unmarshal(r.body, &j)
		if j.Target != (app.JobTarget{Type: "tenant", ID: h.tenantA.ID, DisplayName: "Acme"}) || j.TenantID != h.tenantA.ID {
			t.Fatalf("job %+v", j)
		}
		if rows := h.auditRows(1); rows[0].Action != "retention.run" || rows[0].Status != 202 {
			t.Fatalf("audit row %+v", rows[0])
		}
		// While it is queued, running again answers the same job.
		r = h.do("POST", "/api/v1/retention/run", `{"tenantId":"`+h.tenantA.ID+`"}`, provider...)
		check(t, r, 202, "", `"id":"`+j.ID+`"`)
		// The provider starts tenant B's.
		r = h.do("POST", "/api/v1/retention/run", `{"tenantId":"`+h.tenantB.ID+`"}`, provider...)
		check(t, r, 202, "", `"tenantId":"`+h.tenantB.ID+`"`)
		stored, err := h.db.Jobs(context.Background(), app.JobFilter{Queue: app.QueueRetention})
		if err != nil || len(stored) != 2 {
			t.Fatalf("%d retention jobs stored (%v), want 2", len(stored), err)
		}
	})

	t.Run("documented in openapi.json", func(t *testing.T) {
		r := h.do("GET", "/api/v1/openapi.json", "")
		check(t, r, 200, "")
		body := string(r.body)
		for _, w := range []string{`"/api/v1/retention"`, `"/api/v1/retention/run"`, `"/api/v1/endpoints/{id}/retention"`, `"retention.run"`,
			`"retention.updateEndpoint"`, `"keepMonthlyDays"`} {
			if !strings.Contains(body, w) {
				t.Errorf("openapi.json lacks %s", w)
			}
		}
		run := h.srv.OpenAPI().Paths["/api/v1/retention/run"].Post
		if run.Responses["202"] == nil || run.Responses["200"] != nil || run.Responses["404"] == nil || run.Tags[0] != "retention" {
			t.Errorf("run responses %v tags %v", keys(run.Responses), run.Tags)
		}
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
