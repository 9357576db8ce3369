package restapi

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humahttprouter"
)

// Protected objects, their snapshots and items (CONTRACT §3, §12): reads
// under items:read, the download of one item under restore:write. Every
// call, like every read of backup data, writes an audit row.

func (s *Server) protectedRoutes() {
	get(s, "protectedObjects.list", "/api/v1/protected-objects", app.ScopeItemsRead, "Protected objects (paged, in id order)", s.listProtectedObjects)
	get(s, "protectedObjects.get", "/api/v1/protected-objects/{id}", app.ScopeItemsRead, "One protected object", s.getProtectedObject)
	get(s, "snapshots.list", "/api/v1/protected-objects/{id}/snapshots", app.ScopeItemsRead, "The object's snapshots (paged, newest first)", s.listSnapshots)
	get(s, "snapshotItems.list", "/api/v1/protected-objects/{id}/snapshots/{snapshotId}/items", app.ScopeItemsRead,
		"Browse a snapshot: its items in manifest order (paged); ?folder= one folder, ?q= search subject, sender or name", s.listSnapshotItems)
	get(s, "snapshotItems.content", "/api/v1/protected-objects/{id}/snapshots/{snapshotId}/items/{itemId}/content", app.ScopeRestoreWrite,
		"Download one item's exact stored bytes (message/rfc822 for messages, as <name>.eml)", s.snapshotItemContent)
	if o := s.api.OpenAPI().Paths["/api/v1/protected-objects/{id}/snapshots/{snapshotId}/items/{itemId}/content"]; o != nil && o.Get != nil {
		o.Get.Responses["200"] = &huma.Response{Description: "The exact stored bytes; Content-Disposition names the file.",
			Content: map[string]*huma.MediaType{
				"message/rfc822":           {Schema: &huma.Schema{Type: "string", Format: "binary"}},
				"application/octet-stream": {Schema: &huma.Schema{Type: "string", Format: "binary"}},
			}}
	}
}

func (s *Server) protectedService() (app.ProtectedObjectService, error) {
	if s.Protected == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "Protected objects are not available in this build.")
	}
	return s.Protected, nil
}

type listProtectedInput struct {
	Kind   string `query:"kind" enum:"mailbox,drive,imap"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

type protectedObjectsOutput struct {
	Body struct {
		Items      []app.ProtectedObjectView `json:"items"`
		NextCursor *string                   `json:"nextCursor"`
	}
}

func (s *Server) listProtectedObjects(ctx context.Context, in *listProtectedInput) (*protectedObjectsOutput, error) {
	svc, err := s.protectedService()
	if err != nil {
		return nil, err
	}
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixProtected) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	objs, err := svc.ProtectedObjects(ctx, app.ProtectedObjectFilter{TenantID: principalFrom(ctx).tenantID, Kind: in.Kind,
		AfterID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := &protectedObjectsOutput{}
	out.Body.Items = make([]app.ProtectedObjectView, len(objs))
	for i, o := range objs {
		out.Body.Items[i] = o.View(now)
	}
	if len(objs) > 0 {
		out.Body.NextCursor = nextCursor(len(objs), in.Limit, objs[len(objs)-1].ID)
	}
	return out, nil
}

// visibleObject returns the object when the caller may see it; another
// tenant's is the same not-found as a missing one.
func (s *Server) visibleObject(ctx context.Context, id string) (*app.ProtectedObject, error) {
	svc, err := s.protectedService()
	if err != nil {
		return nil, err
	}
	o, err := svc.ProtectedObject(ctx, id)
	if err != nil {
		return nil, err
	}
	if p := principalFrom(ctx); p.tenantID != "" && o.TenantID != p.tenantID {
		return nil, app.NotFound("protected object")
	}
	actedFor(ctx, o.TenantID)
	return o, nil
}

type protectedObjectOutput struct{ Body app.ProtectedObjectView }

func (s *Server) getProtectedObject(ctx context.Context, in *idInput) (*protectedObjectOutput, error) {
	o, err := s.visibleObject(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return &protectedObjectOutput{Body: o.View(s.now())}, nil
}

type listSnapshotsInput struct {
	ID     string `path:"id" maxLength:"64"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

type snapshotsOutput struct {
	Body struct {
		Items      []*app.Snapshot `json:"items" doc:"Newest first. items counts every manifest entry (folders too)."`
		NextCursor *string         `json:"nextCursor"`
	}
}

func (s *Server) listSnapshots(ctx context.Context, in *listSnapshotsInput) (*snapshotsOutput, error) {
	o, err := s.visibleObject(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixSnapshot) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	out := &snapshotsOutput{}
	out.Body.Items = []*app.Snapshot{}
	if s.Snapshots == nil {
		return out, nil
	}
	snaps, err := s.Snapshots.Snapshots(ctx, app.SnapshotFilter{ProtectedObjectID: o.ID, Before: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out.Body.Items = nonNilSlice(snaps)
	if len(snaps) > 0 {
		out.Body.NextCursor = nextCursor(len(snaps), in.Limit, snaps[len(snaps)-1].ID)
	}
	return out, nil
}

// visibleSnapshot returns the object and its snapshot; a snapshot of
// another object is not found.
func (s *Server) visibleSnapshot(ctx context.Context, objectID, snapshotID string) (*app.ProtectedObject, *app.Snapshot, error) {
	o, err := s.visibleObject(ctx, objectID)
	if err != nil {
		return nil, nil, err
	}
	if s.Snapshots == nil {
		return nil, nil, app.NotFound("snapshot")
	}
	sn, err := s.Snapshots.Snapshot(ctx, snapshotID)
	if err != nil {
		return nil, nil, err
	}
	if sn.ProtectedObjectID != o.ID || sn.TenantID != o.TenantID {
		return nil, nil, app.NotFound("snapshot")
	}
	return o, sn, nil
}

type listItemsInput struct {
	ID         string `path:"id" maxLength:"64"`
	SnapshotID string `path:"snapshotId" maxLength:"64"`
	Folder     string `query:"folder" maxLength:"1024" doc:"One folder (/-separated path): its messages and files and its direct subfolders; / for the top level."`
	Q          string `query:"q" maxLength:"200" doc:"Case-insensitive text in the subject, sender or name."`
	Limit      int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor     string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

type snapshotItemsOutput struct {
	Body struct {
		TenantID   string             `json:"tenantId"`
		Items      []app.SnapshotItem `json:"items" doc:"In manifest order: folders by path, each followed by its messages."`
		NextCursor *string            `json:"nextCursor"`
	}
}

func (s *Server) listSnapshotItems(ctx context.Context, in *listItemsInput) (*snapshotItemsOutput, error) {
	o, sn, err := s.visibleSnapshot(ctx, in.ID, in.SnapshotID)
	if err != nil {
		return nil, err
	}
	items, next, err := s.Snapshots.SnapshotItems(ctx, sn.ID, app.SnapshotItemFilter{Folder: in.Folder, Query: in.Q,
		Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := &snapshotItemsOutput{}
	out.Body.TenantID, out.Body.Items = o.TenantID, items
	if next != "" {
		out.Body.NextCursor = &next
	}
	return out, nil
}

type itemContentInput struct {
	ID         string `path:"id" maxLength:"64"`
	SnapshotID string `path:"snapshotId" maxLength:"64"`
	ItemID     string `path:"itemId" maxLength:"256"`
}

// snapshotItemContent streams an item's exact bytes. Its size is known, so
// the answer has a Content-Length; an item found damaged while it streams
// (its blobs are authenticated before any byte is sent, the whole item's
// SHA-256 at the end) cuts the connection, so a client never takes a
// damaged item for a whole one.
func (s *Server) snapshotItemContent(ctx context.Context, in *itemContentInput) (*huma.StreamResponse, error) {
	_, sn, err := s.visibleSnapshot(ctx, in.ID, in.SnapshotID)
	if err != nil {
		return nil, err
	}
	item, rc, err := s.Snapshots.OpenSnapshotItem(ctx, sn.ID, in.ItemID)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer rc.Close()
		_, w, _ := humahttprouter.Unwrap(hctx)
		h := w.Header()
		ctype, name := "application/octet-stream", item.Name
		if t := mime.TypeByExtension(path.Ext(name)); item.Kind == "file" && t != "" {
			ctype = t
		}
		if item.Kind == "message" {
			ctype = "message/rfc822"
			if !strings.HasSuffix(strings.ToLower(name), ".eml") {
				name += ".eml"
			}
		}
		h.Set("Content-Type", ctype)
		h.Set("Content-Disposition", contentDisposition(name))
		h.Set("Content-Length", strconv.FormatInt(item.Size, 10))
		w.WriteHeader(http.StatusOK)
		if _, err := io.Copy(w, rc); err != nil {
			s.opts.Logger.Error("item download cut short", "request_id", stateFrom(ctx).id, "snapshot_id", sn.ID,
				"item_id", in.ItemID, "error", err)
			panic(http.ErrAbortHandler)
		}
	}}, nil
}

// contentDisposition names the download; a non-ASCII name is also given
// in RFC 8187 form.
func contentDisposition(name string) string {
	v := `attachment; filename="` + safeFilename(name) + `"`
	for _, r := range name {
		if r > 0x7e {
			return v + "; filename*=UTF-8''" + url.PathEscape(name)
		}
	}
	return v
}

// safeFilename keeps a name usable in a quoted Content-Disposition
// filename: no quotes, backslashes, path separators or control characters.
func safeFilename(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r < 0x20, r == 0x7f, r == '"', r == '\\', r == '/':
			return '_'
		}
		return r
	}, name)
	if strings.Trim(name, "._ ") == "" {
		return "item"
	}
	return name
}
