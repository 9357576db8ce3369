// Package storetest opens real SQLite stores for tests: a database file in a
// temporary directory, migrated like production, closed when the test ends.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"backstop/app"
	"backstop/store"
)

// Open opens a new database at dir/backstop.db (dir "" means t.TempDir())
// and closes it when the test ends.
func Open(t testing.TB, dir string) *store.DB {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	db, err := store.Open(context.Background(), filepath.Join(dir, "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Tenant creates a tenant with the name and returns its id.
func Tenant(t testing.TB, db *store.DB, name string) string {
	t.Helper()
	tn := &app.Tenant{Name: name}
	if err := db.CreateTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	return tn.ID
}
