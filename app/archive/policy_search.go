package archive

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"backstop/app"
)

// Search runs a search (CONTRACT §14): q over subject, addresses and body
// text, made safe by FTSQuery; filters on capture time, channel and
// custodian; newest first; purged messages are not found. Each view says
// whether an active hold covers it. The caller sets q.TenantID ("" only
// for a provider reading every tenant).
func (s *Service) Search(ctx context.Context, q SearchQuery) ([]MessageView, string, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	q.Limit = min(q.Limit, 1000)
	fts := FTSQuery(q.Q)
	rows, next, err := s.cfg.Store.SearchArchiveMessages(ctx, q, fts)
	if err != nil {
		return nil, "", err
	}
	views, err := s.views(ctx, rows)
	return views, next, err
}

// views converts rows to the API shape, computing held per tenant.
func (s *Service) views(ctx context.Context, rows []*MessageRow) ([]MessageView, error) {
	byTenant := map[string][]*MessageRow{}
	for _, r := range rows {
		byTenant[r.TenantID] = append(byTenant[r.TenantID], r)
	}
	held := map[int64]bool{}
	for tenant, rs := range byTenant {
		holds, err := s.activeHolds(ctx, tenant)
		if err != nil {
			return nil, err
		}
		h, err := s.heldRows(ctx, holds, rs)
		if err != nil {
			return nil, err
		}
		for id := range h {
			held[id] = true
		}
	}
	out := make([]MessageView, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.view(held[r.RowID]))
	}
	return out, nil
}

func (r *MessageRow) view(held bool) MessageView {
	to := r.To
	if to == nil {
		to = []string{}
	}
	return MessageView{ID: r.ID, TenantID: r.TenantID, SHA256: r.SHA256, Size: r.Size, RecordIndex: r.RecordIndex,
		CapturedAt: app.At(r.CapturedAt), ChannelID: r.ChannelID, Subject: r.Subject, From: r.From, To: to,
		Date: app.AtPtr(r.Date), MessageID: r.MessageID, Journal: r.Journal, Held: held, Purged: r.PurgedAt != nil}
}

// MessageView returns one message (tenantID "": any tenant's), purged ones
// too, with held computed.
func (s *Service) MessageView(ctx context.Context, tenantID, id string) (*MessageView, error) {
	r, err := s.cfg.Store.ArchiveMessageRow(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	v, err := s.views(ctx, []*MessageRow{r})
	if err != nil {
		return nil, err
	}
	return &v[0], nil
}

// Content opens a message's exact bytes: gone (EGONE) once purged.
func (s *Service) Content(ctx context.Context, tenantID, id string) (*Message, io.ReadCloser, error) {
	r, err := s.cfg.Store.ArchiveMessageRow(ctx, tenantID, id)
	if err != nil {
		return nil, nil, err
	}
	if r.PurgedAt != nil {
		return nil, nil, app.Errorf(app.EGONE, "the message was purged by retention on %s", r.PurgedAt.Format(time.RFC3339))
	}
	rc, err := s.OpenContent(ctx, r.TenantID, r.ID)
	if err != nil {
		return nil, nil, err
	}
	return &r.Message, rc, nil
}

// ExportLimit bounds the messages of one export.
const ExportLimit = 100_000

// PreparedExport is an export whose result set and evidence are read;
// WriteTo streams it.
type PreparedExport struct {
	s        *Service
	rows     []*MessageRow
	evidence []byte
	at       time.Time
}

// PrepareExport reads the search's whole result set (at most ExportLimit
// messages) and the evidence report of the query's period (from/to, or
// the result set's capture range), so that what can fail for a reason the
// caller should hear fails before the first byte.
func (s *Service) PrepareExport(ctx context.Context, q SearchQuery) (*PreparedExport, error) {
	if q.TenantID == "" {
		return nil, app.FieldError("body.tenantId", "name the tenant")
	}
	q.Cursor, q.Limit = "", 1000
	fts := FTSQuery(q.Q)
	var rows []*MessageRow
	for {
		page, next, err := s.cfg.Store.SearchArchiveMessages(ctx, q, fts)
		if err != nil {
			return nil, err
		}
		rows = append(rows, page...)
		if len(rows) > ExportLimit {
			return nil, app.FieldError("body", "the result set has more than %d messages: narrow the search", ExportLimit)
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	from, to := q.From, q.To
	for _, r := range rows {
		t := r.CapturedAt
		if q.From == nil && (from == nil || t.Before(*from)) {
			from = &t
		}
		if q.To == nil && (to == nil || t.After(*to)) {
			to = &t
		}
	}
	now := s.cfg.Now().UTC()
	if from == nil {
		from = &now
	}
	if to == nil {
		to = &now
	}
	evidence, err := s.Evidence(ctx, q.TenantID, *from, *to)
	if err != nil {
		return nil, err
	}
	return &PreparedExport{s: s, rows: rows, evidence: evidence, at: now}, nil
}

// Files is how many .eml files the export holds.
func (e *PreparedExport) Files() int { return len(e.rows) }

// WriteTo writes the zip: each message as messages/<sha256>.eml (its exact
// bytes, checked against its SHA-256 as they are written), then
// evidence.json. An error leaves a truncated zip, which no reader takes
// for a whole one.
func (e *PreparedExport) WriteTo(ctx context.Context, w io.Writer) (files int, err error) {
	zw := zip.NewWriter(w)
	for _, r := range e.rows {
		if err := e.s.exportOne(ctx, zw, r); err != nil {
			return files, err
		}
		files++
	}
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "evidence.json", Method: zip.Deflate, Modified: e.at})
	if err != nil {
		return files, err
	}
	if _, err := f.Write(e.evidence); err != nil {
		return files, err
	}
	return files, zw.Close()
}

func (s *Service) exportOne(ctx context.Context, zw *zip.Writer, r *MessageRow) error {
	rc, err := s.OpenContent(ctx, r.TenantID, r.ID)
	if err != nil {
		return fmt.Errorf("exporting %s: %w", r.ID, err)
	}
	defer rc.Close()
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "messages/" + r.SHA256 + ".eml", Method: zip.Deflate, Modified: r.CapturedAt})
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), rc); err != nil {
		return fmt.Errorf("exporting %s: %w", r.ID, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != r.SHA256 {
		return fmt.Errorf("exporting %s: its bytes hash to %s, its record says %s", r.ID, got, r.SHA256)
	}
	return nil
}
