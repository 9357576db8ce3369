package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"backstop/app"
	"backstop/app/archive/chain"

	"golang.org/x/mod/sumdb/tlog"
)

// The archive's log (migration 0015, CONTRACT §14): records and their tlog
// stored hashes. The intake's and the policies' tables are in
// archive_intake.go and archive_policy.go.

// AppendArchiveRecords implements archive.CoreStore. The single writer
// connection serialises appends (of every tenant), so the size read at the
// start of the transaction is the size the records extend.
func (db *DB) AppendArchiveRecords(ctx context.Context, tenantID string, recs []*chain.Record, also func(tx *sql.Tx, first int64) error) (int64, error) {
	var first int64
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		n, err := archiveSize(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		first = n
		// Hashes of this batch, so later records of it read them without SQL.
		batch := map[int64]tlog.Hash{}
		hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			var missing []int64
			for i, x := range idx {
				if h, ok := batch[x]; ok {
					out[i] = h
				} else {
					missing = append(missing, x)
				}
			}
			if len(missing) > 0 {
				got, err := readHashes(ctx, tx, tenantID, missing)
				if err != nil {
					return nil, err
				}
				for i, x := range idx {
					if _, ok := batch[x]; !ok {
						out[i] = got[x]
					}
				}
			}
			return out, nil
		})
		for i, r := range recs {
			idx := n + int64(i)
			text := r.Marshal()
			hashes, err := tlog.StoredHashes(idx, text, hr)
			if err != nil {
				return fmt.Errorf("archive: hashing record %d: %w", idx, err)
			}
			base := tlog.StoredHashIndex(0, idx)
			for j, h := range hashes {
				batch[base+int64(j)] = h
				if _, err := tx.ExecContext(ctx, `INSERT INTO archive_hashes (tenant_id, hidx, hash) VALUES (?,?,?)`,
					tenantID, base+int64(j), h[:]); err != nil {
					return err
				}
			}
			var msg any
			if r.Message != "" {
				msg = r.Message
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO archive_records (tenant_id, idx, type, at, message_id, record) VALUES (?,?,?,?,?,?)`,
				tenantID, idx, r.Type, r.At.UnixMilli(), msg, text); err != nil {
				return err
			}
		}
		if also != nil {
			return also(tx, n)
		}
		return nil
	})
	return first, err
}

func archiveSize(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, tenantID string) (int64, error) {
	var n sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT max(idx) FROM archive_records WHERE tenant_id = ?`, tenantID).Scan(&n)
	if err != nil || !n.Valid {
		return 0, err
	}
	return n.Int64 + 1, nil
}

// readHashes reads stored hashes by index, in batches of at most 500.
func readHashes(ctx context.Context, q querier, tenantID string, idx []int64) (map[int64]tlog.Hash, error) {
	got := make(map[int64]tlog.Hash, len(idx))
	for len(idx) > 0 {
		part := idx[:min(len(idx), 500)]
		idx = idx[len(part):]
		args := make([]any, 0, len(part)+1)
		args = append(args, tenantID)
		for _, x := range part {
			args = append(args, x)
		}
		rows, err := q.QueryContext(ctx, `SELECT hidx, hash FROM archive_hashes WHERE tenant_id = ? AND hidx IN (?`+
			strings.Repeat(",?", len(part)-1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var x int64
			var b []byte
			if err := rows.Scan(&x, &b); err != nil {
				rows.Close()
				return nil, err
			}
			if len(b) != tlog.HashSize {
				rows.Close()
				return nil, fmt.Errorf("archive: stored hash %d of tenant %s has %d bytes", x, tenantID, len(b))
			}
			var h tlog.Hash
			copy(h[:], b)
			got[x] = h
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return got, nil
}

// ArchiveHashReader implements archive.CoreStore: it reads through the
// reader pool, one query per call.
func (db *DB) ArchiveHashReader(tenantID string) chain.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		got, err := readHashes(context.Background(), db.read, tenantID, idx)
		if err != nil {
			return nil, err
		}
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			h, ok := got[x]
			if !ok {
				return nil, fmt.Errorf("archive: stored hash %d of tenant %s is missing", x, tenantID)
			}
			out[i] = h
		}
		return out, nil
	})
}

// ArchiveSize implements archive.CoreStore.
func (db *DB) ArchiveSize(ctx context.Context, tenantID string) (int64, error) {
	return archiveSize(ctx, db.read, tenantID)
}

// ArchiveRecord implements archive.CoreStore.
func (db *DB) ArchiveRecord(ctx context.Context, tenantID string, index int64) ([]byte, error) {
	var text []byte
	err := db.read.QueryRowContext(ctx, `SELECT record FROM archive_records WHERE tenant_id = ? AND idx = ?`, tenantID, index).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("archive record")
	}
	return text, err
}

// ArchiveRecords implements archive.CoreStore.
func (db *DB) ArchiveRecords(ctx context.Context, tenantID string, from, to int64, fn func(index int64, text []byte) error) error {
	rows, err := db.read.QueryContext(ctx, `SELECT idx, record FROM archive_records WHERE tenant_id = ? AND idx >= ? AND idx < ? ORDER BY idx`,
		tenantID, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var idx int64
		var text []byte
		if err := rows.Scan(&idx, &text); err != nil {
			return err
		}
		if err := fn(idx, text); err != nil {
			return err
		}
	}
	return rows.Err()
}
