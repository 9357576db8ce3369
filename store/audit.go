package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"

	"backstop/app"
)

var _ app.AuditService = (*DB)(nil)

// auditWriter group-commits audit rows: concurrent WriteAudit calls are
// gathered into one transaction, and each caller returns only after the
// transaction holding its row has committed. Every answer stays durably
// audited while thousands of reads a second cost a few commits.
type auditWriter struct {
	db      *DB
	pending chan *auditRequest

	// mu guards closed: WriteAudit holds it shared while handing a row
	// over, Close takes it exclusively, so after Close no row can enter
	// pending behind the final drain and wait forever.
	mu     sync.RWMutex
	closed bool
}

type auditRequest struct {
	entry *app.AuditEntry
	done  chan error
}

const auditBatchMax = 512

func newAuditWriter(db *DB) *auditWriter {
	return &auditWriter{db: db, pending: make(chan *auditRequest, 4096)}
}

func (w *auditWriter) run(ctx context.Context) {
	batch := make([]*auditRequest, 0, auditBatchMax)
	for {
		select {
		case r := <-w.pending:
			batch = append(batch[:0], r)
		gather:
			for len(batch) < auditBatchMax {
				select {
				case r := <-w.pending:
					batch = append(batch, r)
				default:
					break gather
				}
			}
			err := w.commit(batch)
			for _, r := range batch {
				r.done <- err
			}
		case <-ctx.Done():
			// Drain what callers already handed over, then stop.
			for {
				select {
				case r := <-w.pending:
					r.done <- w.commit([]*auditRequest{r})
				default:
					return
				}
			}
		}
	}
}

func (w *auditWriter) commit(batch []*auditRequest) error {
	return w.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		stmt, err := tx.Prepare(`INSERT INTO audit_log (at, actor_type, actor_id, actor_name, tenant_id, action,
			target, status, ip, user_agent, request_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range batch {
			e := r.entry
			res, err := stmt.Exec(e.At.UnixMilli(), e.ActorType, e.ActorID, e.ActorName, e.TenantID, e.Action,
				e.Target, e.Status, e.IP, e.UserAgent, e.RequestID)
			if err != nil {
				return err
			}
			e.ID, _ = res.LastInsertId()
		}
		return nil
	})
}

// WriteAudit stores e and returns once it is committed.
func (db *DB) WriteAudit(ctx context.Context, e *app.AuditEntry) error {
	if e.At.IsZero() {
		e.At = app.At(db.Now())
	}
	r := &auditRequest{entry: e, done: make(chan error, 1)}
	w := db.audit
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return errors.New("store: audit log: database is closed")
	}
	select {
	case w.pending <- r:
	case <-ctx.Done():
		w.mu.RUnlock()
		return ctx.Err()
	}
	w.mu.RUnlock()
	// Once handed over the row will be committed; wait for it even if the
	// caller's context ends, so "answered" always means "audited".
	return <-r.done
}

// AuditEntries lists audit rows newest first.
func (db *DB) AuditEntries(ctx context.Context, f app.AuditFilter) ([]*app.AuditEntry, error) {
	var where []string
	var args []any
	if f.TenantID != "" {
		where, args = append(where, "tenant_id = ?"), append(args, f.TenantID)
	}
	if f.ActorID != "" {
		where, args = append(where, "actor_id = ?"), append(args, f.ActorID)
	}
	if f.Since != nil {
		where, args = append(where, "at >= ?"), append(args, f.Since.UnixMilli())
	}
	if f.Until != nil {
		where, args = append(where, "at < ?"), append(args, f.Until.UnixMilli())
	}
	if f.BeforeID > 0 {
		where, args = append(where, "id < ?"), append(args, f.BeforeID)
	}
	q := `SELECT id, at, actor_type, actor_id, actor_name, tenant_id, action, target, status, ip, user_agent,
		request_id FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*app.AuditEntry
	for rows.Next() {
		var e app.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.ActorType, &e.ActorID, &e.ActorName, &e.TenantID, &e.Action, &e.Target,
			&e.Status, &e.IP, &e.UserAgent, &e.RequestID); err != nil {
			return nil, err
		}
		e.At = app.At(msTime(at))
		out = append(out, &e)
	}
	return out, rows.Err()
}
