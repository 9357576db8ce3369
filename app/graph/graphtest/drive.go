package graphtest

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// drive is one user's OneDrive for Business.
type drive struct {
	id, ownerID string
	rootID      string
	items       map[string]*driveItem // live and deleted
	version     int64
}

type driveItem struct {
	id, name, parentID string
	isFolder           bool
	children           map[string]string // lower-case name -> id
	content            []byte
	hash               string
	corrupt            bool
	deleted            bool
	version            int64
	etagN              int
	created, modified  time.Time
}

func newDrive(ownerID string) *drive {
	d := &drive{id: "b!" + randToken(24), ownerID: ownerID, items: map[string]*driveItem{}}
	root := d.add("", "root", true, nil)
	d.rootID = root.id
	return d
}

func driveItemID() string { return "01" + strings.ToUpper(randToken(16))[:32] }

func (d *drive) add(parentID, name string, folder bool, content []byte) *driveItem {
	now := time.Now().UTC()
	it := &driveItem{id: driveItemID(), name: name, parentID: parentID, isFolder: folder, created: now}
	if folder {
		it.children = map[string]string{}
	}
	d.items[it.id] = it
	if p := d.items[parentID]; p != nil {
		p.children[strings.ToLower(name)] = it.id
		d.touch(p)
	}
	it.setContent(content)
	d.touch(it)
	return it
}

func (it *driveItem) setContent(b []byte) {
	if it.isFolder {
		return
	}
	it.content = append([]byte(nil), b...)
	h := newQuickXorHash()
	_, _ = h.Write(it.content)
	it.hash = base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func (d *drive) touch(it *driveItem) {
	d.version++
	it.version = d.version
	it.etagN++
	it.modified = time.Now().UTC()
}

func (d *drive) child(parent *driveItem, name string) *driveItem {
	if parent == nil || !parent.isFolder {
		return nil
	}
	return d.items[parent.children[strings.ToLower(name)]]
}

// byPath resolves a '/'-separated path below from.
func (d *drive) byPath(from *driveItem, p string) *driveItem {
	it := from
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		if part == "" {
			continue
		}
		if it = d.child(it, part); it == nil {
			return nil
		}
	}
	return it
}

func (d *drive) itemPath(it *driveItem) string {
	var parts []string
	for it != nil && it.id != d.rootID {
		parts = append(parts, it.name)
		it = d.items[it.parentID]
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}

func (d *drive) delete(it *driveItem) {
	if it.isFolder {
		// driveitem-delta.md: when a folder is deleted its children
		// are reported deleted too.
		for _, id := range it.children {
			d.delete(d.items[id])
		}
	}
	if p := d.items[it.parentID]; p != nil {
		delete(p.children, strings.ToLower(it.name))
		d.touch(p)
	}
	it.deleted = true
	d.touch(it)
}

func (s *Server) mustDrive(userID string) *drive {
	u := s.mustUser(userID)
	if u.drive == nil {
		panic("graphtest: user has no drive")
	}
	return u.drive
}

// AddFile stores content at path in the user's drive ("a/b.txt";
// folders are created) and returns the item id.
func (s *Server) AddFile(userID, p string, content []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.mustDrive(userID)
	dir, name := path.Split(strings.Trim(p, "/"))
	parent := d.items[d.rootID]
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		if part == "" {
			continue
		}
		next := d.child(parent, part)
		if next == nil {
			next = d.add(parent.id, part, true, nil)
		}
		parent = next
	}
	if old := d.child(parent, name); old != nil && !old.isFolder {
		old.setContent(content)
		old.corrupt = false
		d.touch(old)
		return old.id
	}
	return d.add(parent.id, name, false, content).id
}

// DeleteFile deletes the item at path (delta reports deleted).
func (s *Server) DeleteFile(userID, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.mustDrive(userID)
	if it := d.byPath(d.items[d.rootID], p); it != nil && it.id != d.rootID {
		d.delete(it)
	}
}

// StoredFile is a drive file as the fake holds it.
type StoredFile struct {
	ID           string
	Path         string // from the drive root, '/'-separated
	Content      []byte
	QuickXorHash string
}

// Files returns the user's drive files, sorted by path.
func (s *Server) Files(userID string) []StoredFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.mustDrive(userID)
	var out []StoredFile
	for _, it := range d.items {
		if it.deleted || it.isFolder {
			continue
		}
		out = append(out, StoredFile{ID: it.id, Path: d.itemPath(it), Content: append([]byte(nil), it.content...), QuickXorHash: it.hash})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// CorruptHash makes the file at path report a wrong quickXorHash (a
// download that does not match what Graph claims).
func (s *Server) CorruptHash(userID, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.mustDrive(userID)
	if it := d.byPath(d.items[d.rootID], p); it != nil {
		it.corrupt = true
	}
}

func (it *driveItem) reportedHash() string {
	if !it.corrupt {
		return it.hash
	}
	h := newQuickXorHash()
	_, _ = h.Write(append([]byte("corrupt"), it.content...))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// download is the server-side state of a pre-authenticated download URL.
type download struct {
	driveID, itemID string
	expires         time.Time
}

// itemJSON is a driveItem resource (resources/driveitem.md). inDelta
// leaves out parentReference.path (driveitem-delta.md: path is never
// returned in delta).
func (s *Server) itemJSON(c *call, d *drive, it *driveItem, inDelta bool) map[string]any {
	ref := map[string]any{"driveId": d.id, "driveType": "business"}
	if it.parentID != "" {
		ref["id"] = it.parentID
		if !inDelta {
			if p := d.items[it.parentID]; p != nil {
				pp := "/drive/root:"
				if x := d.itemPath(p); x != "" {
					pp += "/" + x
				}
				ref["path"] = pp
			}
		}
	}
	if it.deleted {
		// driveitem-delta.md: on OneDrive for Business deleted items
		// come without name and cTag.
		return map[string]any{"id": it.id, "deleted": map[string]any{"state": "deleted"}, "parentReference": ref}
	}
	out := map[string]any{
		"id": it.id, "name": it.name, "eTag": "\"{" + it.id + "}," + strconv.Itoa(it.etagN) + "\"",
		"cTag":            "\"c:{" + it.id + "}," + strconv.Itoa(it.etagN) + "\"",
		"createdDateTime": fmtTime(it.created), "lastModifiedDateTime": fmtTime(it.modified),
		"parentReference": ref, "fileSystemInfo": map[string]any{"createdDateTime": fmtTime(it.created), "lastModifiedDateTime": fmtTime(it.modified)},
	}
	if it.isFolder {
		size := 0
		for _, id := range it.children {
			size += len(d.items[id].content)
		}
		out["size"] = size
		out["folder"] = map[string]any{"childCount": len(it.children)}
		if it.id == d.rootID {
			out["root"] = map[string]any{}
		}
		return out
	}
	mt := mime.TypeByExtension(path.Ext(it.name))
	if mt == "" {
		mt = "application/octet-stream"
	}
	out["size"] = len(it.content)
	// hashes.md: OneDrive for Business has only quickXorHash.
	out["file"] = map[string]any{"mimeType": mt, "hashes": map[string]any{"quickXorHash": it.reportedHash()}}
	out["@microsoft.graph.downloadUrl"] = s.downloadURLLocked(d, it)
	return out
}

func (s *Server) downloadURLLocked(d *drive, it *driveItem) string {
	tok := s.putOpaqueLocked(&download{driveID: d.id, itemID: it.id, expires: time.Now().Add(s.opt.DownloadURLLifetime)})
	return s.base + "/download/" + tok + "?tempauth=" + tok
}

// serveDownload is the pre-authenticated download host
// (driveitem-get-content.md): no Authorization needed, Range honoured with
// 206, an expired URL is refused with 401.
func (s *Server) serveDownload(r *http.Request, tok, reqID string) answer {
	c := &call{reqID: reqID, method: r.Method}
	s.mu.Lock()
	s.stats.Requests++
	dl, _ := s.opaque[tok].(*download)
	s.mu.Unlock()
	if dl == nil || time.Now().After(dl.expires) {
		s.sleep()
		return c.errAnswer(http.StatusUnauthorized, "unauthenticated", "Unauthenticated: the tempauth token is invalid or expired.")
	}
	// SharePoint throttling: a file download costs 1 resource unit.
	release, a, ok := s.admitSharePoint(c, 1)
	if !ok {
		s.sleep()
		return a
	}
	defer release()
	s.sleep()
	s.mu.Lock()
	d := s.drives[dl.driveID]
	var content []byte
	if d != nil {
		if it := d.items[dl.itemID]; it != nil && !it.deleted {
			content = it.content
			if content == nil {
				content = []byte{}
			}
		}
	}
	s.mu.Unlock()
	if content == nil {
		return c.errInner(http.StatusNotFound, "itemNotFound", "itemNotFound", "The resource could not be found.")
	}
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Accept-Ranges", "bytes")
	if rg := r.Header.Get("Range"); rg != "" {
		start, end, ok := parseRange(rg, int64(len(content)))
		if !ok {
			h.Set("Content-Range", "bytes */"+strconv.Itoa(len(content)))
			return answer{status: http.StatusRequestedRangeNotSatisfiable, header: h}
		}
		h.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(end, 10)+"/"+strconv.Itoa(len(content)))
		return answer{status: http.StatusPartialContent, header: h, body: content[start : end+1]}
	}
	return answer{status: http.StatusOK, header: h, body: content}
}

// parseRange reads one "bytes=a-b", "bytes=a-" or "bytes=-n" range.
func parseRange(h string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, _ := strings.Cut(spec, "-")
	switch {
	case a == "":
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		start, end = max(0, size-n), size-1
	default:
		var err error
		if start, err = strconv.ParseInt(a, 10, 64); err != nil {
			return 0, 0, false
		}
		end = size - 1
		if b != "" {
			if end, err = strconv.ParseInt(b, 10, 64); err != nil {
				return 0, 0, false
			}
			end = min(end, size-1)
		}
	}
	if start > end || start >= size {
		return 0, 0, false
	}
	return start, end, true
}

// driveJSON is a drive resource (resources/drive.md).
func driveJSON(u *user, d *drive) map[string]any {
	return map[string]any{"id": d.id, "driveType": "business", "name": "OneDrive",
		"owner": map[string]any{"user": map[string]any{"id": u.ID, "displayName": u.DisplayName}}}
}

// userDrive is GET /users/{id}/drive (drive-get.md); a user without a
// OneDrive is 404 ResourceNotFound "User's mysite not found.".
func (s *Server) userDrive(c *call, u *user) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.drive == nil {
		return c.errAnswer(http.StatusNotFound, "ResourceNotFound", "User's mysite not found.")
	}
	return jsonAnswer(http.StatusOK, driveJSON(u, u.drive))
}

func (c *call) itemNotFound() answer {
	return c.errInner(http.StatusNotFound, "itemNotFound", "itemNotFound", "The resource could not be found.")
}

// getItem is GET /drives/{id}/items/{id} and …/root:/path (driveitem-get.md);
// every answer carries a fresh download URL.
func (s *Server) getItem(c *call, d *drive, it *driveItem) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it == nil || it.deleted {
		return c.itemNotFound()
	}
	return jsonAnswer(http.StatusOK, s.itemJSON(c, d, it, false))
}

// itemContent is GET /drives/{id}/items/{id}/content
// (driveitem-get-content.md): 302 Found to the download URL.
func (s *Server) itemContent(c *call, d *drive, it *driveItem) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it == nil || it.deleted || it.isFolder {
		return c.itemNotFound()
	}
	return withHeader(answer{status: http.StatusFound}, "Location", s.downloadURLLocked(d, it))
}

// listChildren is GET /drives/{id}/items/{id}/children (driveitem-list-children.md).
func (s *Server) listChildren(c *call, d *drive, it *driveItem) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it == nil || it.deleted || !it.isFolder {
		return c.itemNotFound()
	}
	vals := []map[string]any{}
	for _, id := range it.children {
		vals = append(vals, s.itemJSON(c, d, d.items[id], false))
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i]["name"].(string) < vals[j]["name"].(string) })
	return jsonAnswer(http.StatusOK, map[string]any{"value": vals})
}

// createChild is POST /drives/{id}/items/{id}/children with a folder
// (driveitem-post-children.md); conflictBehavior fail (the default)
// answers 409 nameAlreadyExists.
func (s *Server) createChild(c *call, d *drive, parent *driveItem) answer {
	var in struct {
		Name     string          `json:"name"`
		Folder   json.RawMessage `json:"folder"`
		Conflict string          `json:"@microsoft.graph.conflictBehavior"`
	}
	if err := json.Unmarshal(c.body, &in); err != nil || in.Name == "" {
		return c.errAnswer(http.StatusBadRequest, "invalidRequest", "Invalid request body.")
	}
	if in.Folder == nil {
		return c.errAnswer(http.StatusBadRequest, "invalidRequest", "A folder facet is required to create an item here.")
	}
	conflict := in.Conflict
	if q := c.query.Get("@microsoft.graph.conflictBehavior"); q != "" {
		conflict = q
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if parent == nil || parent.deleted || !parent.isFolder {
		return c.itemNotFound()
	}
	if old := d.child(parent, in.Name); old != nil {
		switch conflict {
		case "replace":
			if old.isFolder {
				return jsonAnswer(http.StatusOK, s.itemJSON(c, d, old, false))
			}
			d.delete(old)
		case "rename":
			in.Name = uniqueName(d, parent, in.Name)
		default:
			return c.errInner(http.StatusConflict, "nameAlreadyExists", "nameAlreadyExists", "The specified item name already exists.")
		}
	}
	it := d.add(parent.id, in.Name, true, nil)
	return jsonAnswer(http.StatusCreated, s.itemJSON(c, d, it, false))
}

func uniqueName(d *drive, parent *driveItem, name string) string {
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; ; i++ {
		n := stem + " " + strconv.Itoa(i) + ext
		if d.child(parent, n) == nil {
			return n
		}
	}
}
