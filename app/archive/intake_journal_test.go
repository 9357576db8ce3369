package archive_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// searchFTS answers the messages whose search row matches q.
func (f *fixture) searchFTS(q string) []string {
	f.t.Helper()
	rows, err := f.db.Reader().Query(`SELECT m.id FROM archive_fts JOIN archive_messages m ON m.rowid = archive_fts.rowid
		WHERE archive_fts MATCH ? AND m.tenant_id = ?`, q, f.tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids
}

func TestJournalReportsOverSMTP(t *testing.T) {
	f := newFixture(t, opts{every: 50 * time.Millisecond})
	ctx := context.Background()
	ch := f.channel()
	other := f.channel()
	addr := f.listen(nil)
	report, err := os.ReadFile("testdata/journal_report.eml")
	if err != nil {
		t.Fatal(err)
	}
	// Exchange sends two reports of one message (two journal rules): two
	// records, one copy. The second goes to two channels at once.
	if err := send(addr, []string{ch.Address}, report); err != nil {
		t.Fatal(err)
	}
	if err := send(addr, []string{ch.Address, other.Address}, report); err != nil {
		t.Fatal(err)
	}
	sm, err := f.db.ArchiveMessageBySHA(ctx, f.tenant, sha(report))
	if err != nil {
		t.Fatal(err)
	}
	if !sm.Journal || sm.Subject != "Quartalsbericht für Q3" || sm.From != "juergen@contoso.com" {
		t.Fatalf("message %+v", sm.Message)
	}
	if n, _ := f.db.ArchiveSize(ctx, f.tenant); n != 3 {
		t.Fatalf("%d records, want 3", n)
	}
	if msgs, _, _ := f.db.ArchiveStats(ctx, f.tenant); msgs != 1 {
		t.Fatalf("%d messages, want 1", msgs)
	}
	var caps int
	f.db.Reader().QueryRow(`SELECT count(*) FROM archive_captures WHERE message_id = ?`, sm.ID).Scan(&caps)
	if caps != 3 {
		t.Fatalf("%d captures, want 3", caps)
	}
	// Searchable by envelope recipients (Bcc, expanded list) and body text.
	for _, q := range []string{`"secret.bcc@contoso.com"`, `"team-dl@contoso.com"`, "zebrafisch", "Quartalsbericht"} {
		if ids := f.searchFTS(q); len(ids) != 1 || ids[0] != sm.ID {
			t.Errorf("search %s: %v", q, ids)
		}
	}
	if !strings.Contains(strings.Join(sm.Custodians, " "), "forwarder@contoso.com") {
		t.Errorf("custodians %v", sm.Custodians)
	}

	// A report without its message/rfc822 part is stored whole.
	env, _ := os.ReadFile("testdata/journal_envelope_only.eml")
	if err := send(addr, []string{ch.Address}, env); err != nil {
		t.Fatal(err)
	}
	sm2, err := f.db.ArchiveMessageBySHA(ctx, f.tenant, sha(env))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.content(sm2.ID); string(got) != string(env) || !sm2.Journal || sm2.Subject != "Quartalsbericht für Q3" {
		t.Fatalf("envelope-only report %+v", sm2.Message)
	}
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil {
		t.Fatal(err)
	}
}
