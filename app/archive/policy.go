package archive

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"backstop/app"
	"backstop/app/archive/chain"
)

// The policy part (CONTRACT §14): retention rules, legal holds, the purge
// (run by the tenant's retention job), search, export and the evidence
// report. It has no background work of its own: the purge runs inside the
// retention job.

type policy struct {
	s *Service
	// mu orders hold creation and purge batches, so a purge never misses
	// a hold placed while it ran.
	mu sync.Mutex
}

func newPolicy(s *Service) (*policy, error) { return &policy{s: s}, nil }

func (p *policy) run(ctx context.Context) { <-ctx.Done() }

// MessageRow is a stored message with what only the store knows: its row
// (the search index's rowid, the order of capture) and whether its bytes
// are still in the spool.
type MessageRow struct {
	Message
	RowID   int64
	Spooled bool
	// Spool is its segment slice, while the segment is kept (also after
	// the move: a purge wipes it).
	Spool SpoolSlice
}

// PolicyStore is the policy part's SQL (store/archive_policy.go).
type PolicyStore interface {
	ArchiveRetention(ctx context.Context, tenantID string) (Retention, bool, error)
	SetArchiveRetention(ctx context.Context, tenantID string, r Retention) error
	// InsertArchiveHoldTx and ReleaseArchiveHoldTx run inside
	// AppendArchiveRecords' transaction (the hold and release records).
	InsertArchiveHoldTx(ctx context.Context, tx *sql.Tx, h *Hold) error
	ReleaseArchiveHoldTx(ctx context.Context, tx *sql.Tx, h *Hold) error
	ArchiveHold(ctx context.Context, tenantID, id string) (*Hold, error)
	ArchiveHolds(ctx context.Context, tenantID, beforeID string, limit int) ([]*Hold, error)
	ArchiveMessageRow(ctx context.Context, tenantID, id string) (*MessageRow, error)
	ArchiveRetentionCandidates(ctx context.Context, tenantID string, capturedBy time.Time, afterRow int64, limit int) ([]*MessageRow, error)
	ArchiveFTSMatches(ctx context.Context, expr string, rows []int64) (map[int64]bool, error)
	// MarkArchivePurgedTx runs inside the tombstones' transaction.
	MarkArchivePurgedTx(ctx context.Context, tx *sql.Tx, tenantID string, rows []int64, at time.Time) error
	ArchivePurgedSHA256(ctx context.Context, tenantID string, shas []string) (map[string]bool, error)
	SearchArchiveMessages(ctx context.Context, q SearchQuery, fts string) ([]*MessageRow, string, error)
	ArchiveRecordSpan(ctx context.Context, tenantID string, from, to time.Time, size int64) (first, last int64, ok bool, err error)
	ArchiveRecordBefore(ctx context.Context, tenantID string, t time.Time, size int64) (index int64, ok bool, err error)
	ArchiveRecordRows(ctx context.Context, tenantID string, from, to int64, fn func(index int64, typ string, at time.Time, text []byte) error) error
	ArchiveCheckpointAtMost(ctx context.Context, tenantID string, size int64) (*StoredCheckpoint, error)
}

// ---- Retention rules ----

// RetentionOf returns the tenant's retention rules, or the default (every
// message kept DefaultRetentionDays) with isDefault when it saved none.
func (s *Service) RetentionOf(ctx context.Context, tenantID string) (r Retention, isDefault bool, err error) {
	r, set, err := s.cfg.Store.ArchiveRetention(ctx, tenantID)
	if err != nil {
		return Retention{}, false, err
	}
	if !set {
		return Retention{DefaultDays: DefaultRetentionDays, Rules: []RetentionRule{}}, true, nil
	}
	if r.Rules == nil {
		r.Rules = []RetentionRule{}
	}
	return r, false, nil
}

// SetRetention validates and stores the tenant's retention rules.
func (s *Service) SetRetention(ctx context.Context, tenantID string, r Retention) error {
	if err := ValidateRetention(r, "body"); err != nil {
		return err
	}
	for i := range r.Rules {
		m := &r.Rules[i].Match
		m.From, m.To = strings.ToLower(strings.TrimSpace(m.From)), strings.ToLower(strings.TrimSpace(m.To))
	}
	return s.cfg.Store.SetArchiveRetention(ctx, tenantID, r)
}

// maxRetentionDays bounds days so captured_at + days never overflows.
const maxRetentionDays = 100 * 366

// ValidateRetention checks rules; field prefixes the error's location.
func ValidateRetention(r Retention, field string) error {
	if r.DefaultDays < 0 || r.DefaultDays > maxRetentionDays {
		return app.FieldError(field+".defaultDays", "must be between 0 and %d", maxRetentionDays)
	}
	if len(r.Rules) > 100 {
		return app.FieldError(field+".rules", "at most 100 rules")
	}
	for i, rule := range r.Rules {
		at := fmt.Sprintf("%s.rules[%d]", field, i)
		if rule.Days < 0 || rule.Days > maxRetentionDays {
			return app.FieldError(at+".days", "must be between 0 and %d", maxRetentionDays)
		}
		m := rule.Match
		if m.Channel == "" && m.From == "" && m.To == "" && m.SubjectContains == "" {
			return app.FieldError(at+".match", "name at least one of channel, from, to, subjectContains")
		}
		for name, v := range map[string]string{"from": m.From, "to": m.To} {
			if v != "" && !strings.Contains(v, "@") {
				return app.FieldError(at+".match."+name, "an address (a@example.com) or a domain (@example.com)")
			}
		}
		for name, v := range map[string]string{"channel": m.Channel, "from": m.From, "to": m.To, "subjectContains": m.SubjectContains} {
			if len(v) > 320 || !utf8.ValidString(v) {
				return app.FieldError(at+".match."+name, "at most 320 bytes of UTF-8")
			}
		}
	}
	return nil
}

// ruleFor returns the days a message is kept and why: the first matching
// rule, else the default.
func ruleFor(r Retention, m *Message) (days int, reason string) {
	for i, rule := range r.Rules {
		if rule.matches(m) {
			return rule.Days, fmt.Sprintf("retention rule %d: %d days", i+1, rule.Days)
		}
	}
	return r.DefaultDays, fmt.Sprintf("retention default %d days", r.DefaultDays)
}

func (rule RetentionRule) matches(m *Message) bool {
	x := rule.Match
	if x.Channel != "" && x.Channel != m.ChannelID {
		return false
	}
	if x.From != "" && !addressMatches(strings.ToLower(m.From), x.From) {
		return false
	}
	if x.To != "" {
		found := false
		for _, a := range m.To {
			if addressMatches(strings.ToLower(a), strings.ToLower(x.To)) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if x.SubjectContains != "" && !strings.Contains(strings.ToLower(m.Subject), strings.ToLower(x.SubjectContains)) {
		return false
	}
	return true
}

// addressMatches reports whether addr (lowercase, perhaps "Name <a@b>")
// is pattern: an address, or "@domain" for any address of the domain.
func addressMatches(addr, pattern string) bool {
	pattern = strings.ToLower(strings.TrimSpace(pattern))
	if i := strings.LastIndexByte(addr, '<'); i >= 0 {
		addr = strings.TrimSuffix(addr[i+1:], ">")
	}
	addr = strings.TrimSpace(addr)
	if strings.HasPrefix(pattern, "@") {
		return strings.HasSuffix(addr, pattern)
	}
	return addr == pattern
}

// ---- Legal holds ----

// CreateHold places a legal hold: its row and its hold record (reason
// "<hold id> <name>") are committed together.
func (s *Service) CreateHold(ctx context.Context, spec HoldSpec) (*Hold, error) {
	name := strings.TrimSpace(spec.Name)
	if name == "" || len(name) > 200 {
		return nil, app.FieldError("body.name", "a name of 1 to 200 bytes")
	}
	if spec.From != nil && spec.To != nil && spec.To.Before(*spec.From) {
		return nil, app.FieldError("body.to", "must not be before from")
	}
	var cust []string
	for i, c := range spec.Custodians {
		c = strings.ToLower(strings.TrimSpace(c))
		if !strings.Contains(c, "@") || strings.ContainsAny(c, " \t\r\n") || len(c) > 320 {
			return nil, app.FieldError(fmt.Sprintf("body.custodians[%d]", i), "an address (a@example.com) or a domain (@example.com)")
		}
		cust = append(cust, c)
	}
	if strings.TrimSpace(spec.Query) != "" && FTSQuery(spec.Query) == "" {
		return nil, app.FieldError("body.query", "no searchable words")
	}
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)
	h := &Hold{ID: app.NewID(PrefixHold), TenantID: spec.TenantID, Name: name, Matter: strings.TrimSpace(spec.Matter),
		Custodians: cust, From: utcPtr(spec.From), To: utcPtr(spec.To), Query: strings.TrimSpace(spec.Query),
		CreatedAt: now, CreatedBy: spec.By}
	if h.Custodians == nil {
		h.Custodians = []string{}
	}
	s.policy.mu.Lock()
	defer s.policy.mu.Unlock()
	rec := &chain.Record{Type: chain.TypeHold, Tenant: h.TenantID, At: now, Reason: h.ID + " " + h.Name}
	_, err := s.cfg.Store.AppendArchiveRecords(ctx, h.TenantID, []*chain.Record{rec}, func(tx *sql.Tx, first int64) error {
		h.RecordIndex = first
		return s.cfg.Store.InsertArchiveHoldTx(ctx, tx, h)
	})
	if err != nil {
		return nil, err
	}
	s.appended(h.TenantID)
	s.log.Info("legal hold placed", "tenant_id", h.TenantID, "hold_id", h.ID, "record_index", h.RecordIndex)
	return h, nil
}

// ReleaseHold releases an active hold with a reason (required): its
// release record and the row's change are committed together. Releasing
// twice is a conflict.
func (s *Service) ReleaseHold(ctx context.Context, tenantID, id, reason, by string) (*Hold, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" || len(reason) > 1000 {
		return nil, app.FieldError("body.reason", "a reason of 1 to 1000 bytes")
	}
	h, err := s.cfg.Store.ArchiveHold(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if h.ReleasedAt != nil {
		return nil, app.Errorf(app.ECONFLICT, "the hold was released already")
	}
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)
	rec := &chain.Record{Type: chain.TypeRelease, Tenant: h.TenantID, At: now, Reason: h.ID + " " + h.Name}
	_, err = s.cfg.Store.AppendArchiveRecords(ctx, h.TenantID, []*chain.Record{rec}, func(tx *sql.Tx, first int64) error {
		h.ReleasedAt, h.ReleaseReason, h.ReleasedBy, h.ReleaseRecordIndex = &now, reason, by, &first
		return s.cfg.Store.ReleaseArchiveHoldTx(ctx, tx, h)
	})
	if err != nil {
		return nil, err
	}
	s.appended(h.TenantID)
	s.log.Info("legal hold released", "tenant_id", h.TenantID, "hold_id", h.ID, "record_index", *h.ReleaseRecordIndex)
	return h, nil
}

// Hold returns one hold (tenantID "": any tenant's).
func (s *Service) Hold(ctx context.Context, tenantID, id string) (*Hold, error) {
	return s.cfg.Store.ArchiveHold(ctx, tenantID, id)
}

// Holds lists holds newest first (tenantID "": every tenant's), paged by id.
func (s *Service) Holds(ctx context.Context, tenantID, beforeID string, limit int) ([]*Hold, error) {
	return s.cfg.Store.ArchiveHolds(ctx, tenantID, beforeID, limit)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Millisecond)
	return &u
}

// activeHolds returns the tenant's holds not released.
func (s *Service) activeHolds(ctx context.Context, tenantID string) ([]*Hold, error) {
	all, err := s.cfg.Store.ArchiveHolds(ctx, tenantID, "", 0)
	if err != nil {
		return nil, err
	}
	var out []*Hold
	for _, h := range all {
		if h.ReleasedAt == nil {
			out = append(out, h)
		}
	}
	return out, nil
}

// heldRows returns which of rows the holds cover: custodians, period and
// (through the search index) query.
func (s *Service) heldRows(ctx context.Context, holds []*Hold, rows []*MessageRow) (map[int64]bool, error) {
	held := map[int64]bool{}
	for _, h := range holds {
		var pending []int64
		for _, r := range rows {
			if !held[r.RowID] && h.coversMeta(&r.Message) {
				pending = append(pending, r.RowID)
			}
		}
		if len(pending) == 0 {
			continue
		}
		if h.Query == "" {
			for _, id := range pending {
				held[id] = true
			}
			continue
		}
		for len(pending) > 0 {
			n := min(len(pending), 500)
			m, err := s.cfg.Store.ArchiveFTSMatches(ctx, FTSQuery(h.Query), pending[:n])
			if err != nil {
				return nil, err
			}
			for id := range m {
				held[id] = true
			}
			pending = pending[n:]
		}
	}
	return held, nil
}

// coversMeta reports whether the hold covers m by custodians and period
// (the query is checked against the index). A hold errs on keeping: a
// message is in the period when its capture time or its Date is.
func (h *Hold) coversMeta(m *Message) bool {
	if len(h.Custodians) > 0 {
		found := false
	custodians:
		for _, c := range h.Custodians {
			for _, a := range m.Custodians {
				if addressMatches(strings.ToLower(a), c) {
					found = true
					break custodians
				}
			}
		}
		if !found {
			return false
		}
	}
	if h.From == nil && h.To == nil {
		return true
	}
	in := func(t time.Time) bool {
		return (h.From == nil || !t.Before(*h.From)) && (h.To == nil || !t.After(*h.To))
	}
	return in(m.CapturedAt) || m.Date != nil && in(*m.Date)
}

// ---- Search text ----

// FTSQuery turns a user's search text into a safe FTS5 expression: every
// whitespace-separated word becomes a quoted string (so no FTS5 syntax —
// operators, column filters, NEAR, parentheses — gets through), all
// required; a word ending in * is a prefix search. "" when there is no
// word.
func FTSQuery(text string) string {
	var terms []string
	for _, w := range strings.Fields(text) {
		prefix := false
		if len(w) > 1 && strings.HasSuffix(w, "*") {
			w, prefix = strings.TrimRight(w, "*"), true
		}
		if !hasWordRune(w) {
			continue
		}
		t := `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
		if prefix {
			t += "*"
		}
		terms = append(terms, t)
		if len(terms) == 32 {
			break
		}
	}
	return strings.Join(terms, " ")
}

// hasWordRune reports whether w has a letter or digit (a quoted string of
// only punctuation is an empty phrase, which FTS5 rejects in some places).
func hasWordRune(w string) bool {
	for _, r := range w {
		if r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f {
			return true
		}
	}
	return false
}
