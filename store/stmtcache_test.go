package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"backstop/app"
)

// Cached statements serve concurrent readers on every pooled connection
// with the right rows, see writes made after they were prepared, and keep
// not-found a not-found.
func TestCachedStatementsUnderConcurrency(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")
	var ids []string
	for i := 0; i < 20; i++ {
		e := &app.Endpoint{TenantID: tn.ID, Hostname: fmt.Sprintf("h%d", i), Profile: app.ProfileServer}
		if err := db.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				n := (g + i) % len(ids)
				e, err := db.Endpoint(ctx, ids[n])
				if err != nil || e.Hostname != fmt.Sprintf("h%d", n) {
					errs <- fmt.Errorf("Endpoint(%s) = %v, %v", ids[n], e, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := db.UpdateEndpoint(ctx, ids[3], func(e *app.Endpoint) error { e.Hostname = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	if e, err := db.Endpoint(ctx, ids[3]); err != nil || e.Hostname != "renamed" {
		t.Fatalf("after update: %v, %v", e, err)
	}
	_, err := db.Endpoint(ctx, "ep_missing")
	wantCode(t, err, app.ENOTFOUND)
	_, err = db.Key(ctx, "key_missing")
	wantCode(t, err, app.ENOTFOUND)
}
