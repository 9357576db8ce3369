package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
)

var (
	benchWords = strings.Fields(`invoice quarterly report meeting budget contract merger review schedule project
		deadline proposal customer support ticket shipment order payment reminder agenda minutes forecast audit
		compliance policy renewal license server backup migration outage incident release roadmap hiring offer
		travel expense approval signature draft final urgent update weekly monthly annual summary`)
	benchPeople  = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar", "peggy", "trent", "victor", "walter"}
	benchDomains = []string{"example.com", "vendor.test", "acme.test", "partner.org", "customer.net"}
)

// seedArchive inserts n messages (metadata, custodians and search text)
// straight into a new database, captured one a minute up to now.
func seedArchive(tb testing.TB, db *DB, tenant string, n int, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func() string {
		return benchPeople[rng.IntN(len(benchPeople))] + "@" + benchDomains[rng.IntN(len(benchDomains))]
	}
	words := func(k int) string {
		var b strings.Builder
		for i := range k {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(benchWords[rng.IntN(len(benchWords))])
		}
		return b.String()
	}
	start := now.Add(-time.Duration(n) * time.Minute)
	const batch = 20000
	for done := 0; done < n; done += batch {
		err := db.WriteTx(ctx, func(tx *sql.Tx) error {
			msg, err := tx.PrepareContext(ctx, `INSERT INTO archive_messages (id, tenant_id, sha256, size, content, record_index, captured_at,
				channel_id, subject, from_addr, to_addrs, date, message_id, custodians) VALUES (?, ?, ?, ?, 'x', ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
			if err != nil {
				return err
			}
			fts, err := tx.PrepareContext(ctx, "INSERT INTO archive_fts (rowid, subject, addresses, body) VALUES (?, ?, ?, ?)")
			if err != nil {
				return err
			}
			for i := done; i < min(done+batch, n); i++ {
				from, to1, to2 := addr(), addr(), addr()
				subject := words(4)
				at := start.Add(time.Duration(i) * time.Minute).UnixMilli()
				res, err := msg.ExecContext(ctx, fmt.Sprintf("am_%012d", i), tenant, fmt.Sprintf("%064x", i), 2000+rng.IntN(50000), i, at,
					"ch_"+strconv.Itoa(i%4), subject, from, to1+" "+to2, at, fmt.Sprintf("<%d@x>", i), " "+from+" "+to1+" "+to2+" ")
				if err != nil {
					return err
				}
				row, _ := res.LastInsertId()
				if _, err := fts.ExecContext(ctx, row, subject, from+" "+to1+" "+to2, words(60)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// TestArchiveSearchLatency measures the p95 of 100 varied searches over
// 1,000,000 messages (BACKSTOP_BENCH_ARCHIVE=1; the seeding takes a while).
func TestArchiveSearchLatency(t *testing.T) {
	n := 1_000_000
	if os.Getenv("BACKSTOP_BENCH_ARCHIVE") == "" {
		if testing.Short() {
			t.Skip("set BACKSTOP_BENCH_ARCHIVE=1 for 1,000,000 messages")
		}
		n = 20_000
	}
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tn := &app.Tenant{Name: "bench"}
	if err := db.CreateTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	began := time.Now()
	seedArchive(t, db, tn.ID, n, now)
	t.Logf("seeded %d messages in %s", n, time.Since(began).Round(time.Millisecond))

	rng := rand.New(rand.NewPCG(3, 4))
	var took []time.Duration
	ctx := context.Background()
	for i := range 100 {
		q := archive.SearchQuery{TenantID: tn.ID, Limit: 50}
		switch i % 10 {
		case 0:
			q.Q = benchWords[rng.IntN(len(benchWords))]
		case 1:
			q.Q = benchWords[rng.IntN(len(benchWords))] + " " + benchWords[rng.IntN(len(benchWords))]
		case 2:
			q.Q = benchPeople[rng.IntN(len(benchPeople))] + " " + benchWords[rng.IntN(len(benchWords))]
		case 3:
			q.Custodian = benchPeople[rng.IntN(len(benchPeople))] + "@" + benchDomains[rng.IntN(len(benchDomains))]
		case 4:
			from := now.Add(-time.Duration(rng.IntN(n)) * time.Minute)
			to := from.Add(7 * 24 * time.Hour)
			q.From, q.To = &from, &to
		case 5:
			from := now.Add(-time.Duration(rng.IntN(n)) * time.Minute)
			to := from.Add(30 * 24 * time.Hour)
			q.Q, q.From, q.To = benchWords[rng.IntN(len(benchWords))], &from, &to
		case 6:
			q.Q, q.ChannelID = benchWords[rng.IntN(len(benchWords))], "ch_"+strconv.Itoa(rng.IntN(4))
		case 7:
			q.Q = "quart*"
		case 8:
			q.Q, q.Custodian = benchWords[rng.IntN(len(benchWords))], "@"+benchDomains[rng.IntN(len(benchDomains))]
		case 9:
			q.Q = benchWords[rng.IntN(len(benchWords))] + " " + benchWords[rng.IntN(len(benchWords))] + " " + benchWords[rng.IntN(len(benchWords))]
		}
		fts := archive.FTSQuery(q.Q)
		start := time.Now()
		page, next, err := db.SearchArchiveMessages(ctx, q, fts)
		if err != nil {
			t.Fatal(err)
		}
		if next != "" && i%2 == 0 { // and the next page
			q.Cursor = next
			if _, _, err := db.SearchArchiveMessages(ctx, q, fts); err != nil {
				t.Fatal(err)
			}
		}
		d := time.Since(start)
		took = append(took, d)
		if d > 200*time.Millisecond {
			t.Logf("slow: %v %q custodian=%q channel=%q from=%v (%d results)", d, q.Q, q.Custodian, q.ChannelID, q.From, len(page))
		}
	}
	slices.Sort(took)
	p50, p95, worst := took[49], took[94], took[99]
	t.Logf("search over %d messages: p50 %s, p95 %s, max %s", n, p50, p95, worst)
	if n == 1_000_000 && p95 > 200*time.Millisecond {
		t.Errorf("p95 %s over 200 ms", p95)
	}
}
