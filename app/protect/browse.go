package protect

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
)

// Browsing snapshots. A snapshot's items are its manifest in the blob
// store, read in order; a page's cursor is the position in the manifest
// after its last item (a snapshot never changes, so positions are stable).
//
// The manifest conventions this relies on (the IMAP engine writes them):
// a message's Path is its folder's path, '/'-separated; a folder item's
// Path is the folder's own path; item ids contain no '/', so they fit in a
// URL path segment; a message's Meta is an imapbackup.MessageMeta or an
// m365.MessageMeta; a file's Path is its folder's path and Name its name.

// Snapshots lists snapshots newest first.
func (m *Manager) Snapshots(ctx context.Context, f app.SnapshotFilter) ([]*app.Snapshot, error) {
	return m.cfg.Blobs.Snapshots(ctx, f)
}

// Snapshot returns one snapshot.
func (m *Manager) Snapshot(ctx context.Context, id string) (*app.Snapshot, error) {
	s, _, err := m.cfg.Catalog.Snapshot(ctx, id)
	return s, err
}

var errPageFull = errors.New("page full")

// SnapshotItems returns a page of a snapshot's items matching f.
func (m *Manager) SnapshotItems(ctx context.Context, snapshotID string, f app.SnapshotItemFilter) ([]app.SnapshotItem, string, error) {
	start, err := parseItemCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := strings.ToLower(f.Query)
	var out []app.SnapshotItem
	next, pos := "", 0
	err = m.cfg.Blobs.Items(ctx, snapshotID, func(it blobstore.Item) error {
		pos++
		if pos <= start || !inFolder(it, f.Folder) {
			return nil
		}
		w := wireItem(it)
		if q != "" && !matches(w, q) {
			return nil
		}
		if len(out) == limit {
			next = itemCursor(pos - 1)
			return errPageFull
		}
		out = append(out, w)
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, "", err
	}
	if out == nil {
		out = []app.SnapshotItem{}
	}
	return out, next, nil
}

// OpenSnapshotItem finds an item by id and opens its exact bytes.
func (m *Manager) OpenSnapshotItem(ctx context.Context, snapshotID, itemID string) (app.SnapshotItem, io.ReadCloser, error) {
	snap, _, err := m.cfg.Catalog.Snapshot(ctx, snapshotID)
	if err != nil {
		return app.SnapshotItem{}, nil, err
	}
	var found *blobstore.Item
	err = m.cfg.Blobs.Items(ctx, snapshotID, func(it blobstore.Item) error {
		if it.ID == itemID {
			found = &it
			return errPageFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return app.SnapshotItem{}, nil, err
	}
	if found == nil || found.Kind == "folder" {
		return app.SnapshotItem{}, nil, app.NotFound("item")
	}
	r, err := m.cfg.Blobs.Open(ctx, snap.TenantID, found.Content)
	if err != nil {
		return app.SnapshotItem{}, nil, err
	}
	return wireItem(*found), r, nil
}

// inFolder reports whether it belongs in a listing of folder: a message
// or file in it, or a direct subfolder. "" lists everything; "/" is the
// top level.
func inFolder(it blobstore.Item, folder string) bool {
	if folder == "" {
		return true
	}
	folder = strings.Trim(folder, "/")
	if it.Kind == "folder" {
		parent := ""
		if i := strings.LastIndex(strings.Trim(it.Path, "/"), "/"); i >= 0 {
			parent = strings.Trim(it.Path, "/")[:i]
		}
		return parent == folder
	}
	return strings.Trim(it.Path, "/") == folder
}

func matches(w app.SnapshotItem, q string) bool {
	return strings.Contains(strings.ToLower(w.Subject), q) || strings.Contains(strings.ToLower(w.From), q) ||
		strings.Contains(strings.ToLower(w.Name), q)
}

// messageMeta is what browsing reads of a message's Meta: the fields
// imapbackup.MessageMeta and m365.MessageMeta share (subject, from, date
// as RFC 3339), IMAP's flags, and Graph's read and flagged states.
type messageMeta struct {
	Subject string   `json:"subject"`
	From    string   `json:"from"`
	Date    string   `json:"date"`
	Flags   []string `json:"flags"`
	GraphID string   `json:"graphId"`
	IsRead  bool     `json:"isRead"`
	Flagged bool     `json:"flagged"`
}

// wireItem is the API's view of a manifest entry; a message's subject,
// sender, date and flags come from its Meta (an IMAP or a Microsoft 365
// message); a file's name, path, size and SHA-256 are the item's own.
func wireItem(it blobstore.Item) app.SnapshotItem {
	w := app.SnapshotItem{ID: it.ID, Kind: it.Kind, Path: it.Path, Name: it.Name, Size: it.Size, SHA256: it.SHA256}
	if it.Kind == "message" && len(it.Meta) > 0 {
		var mm messageMeta
		if json.Unmarshal(it.Meta, &mm) == nil {
			w.Subject, w.From, w.Flags = mm.Subject, mm.From, mm.Flags
			if mm.GraphID != "" { // Graph's states as the IMAP flags they are
				if mm.IsRead {
					w.Flags = append(w.Flags, `\Seen`)
				}
				if mm.Flagged {
					w.Flags = append(w.Flags, `\Flagged`)
				}
			}
			if d, err := time.Parse(time.RFC3339, mm.Date); err == nil {
				w.Date = app.Ptr(app.At(d))
			}
		}
	}
	return w
}

func itemCursor(pos int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("i:" + strconv.Itoa(pos)))
}

func parseItemCursor(c string) (int, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	n, perr := strconv.Atoi(strings.TrimPrefix(string(b), "i:"))
	if err != nil || perr != nil || !strings.HasPrefix(string(b), "i:") || n < 0 {
		return 0, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	return n, nil
}
