package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Drive is a user's OneDrive.
type Drive struct {
	ID        string `json:"id"`
	DriveType string `json:"driveType"`
}

// Hashes of a file; OneDrive for Business has only quickXorHash.
type Hashes struct {
	QuickXorHash string `json:"quickXorHash,omitempty"`
	SHA1Hash     string `json:"sha1Hash,omitempty"`
	SHA256Hash   string `json:"sha256Hash,omitempty"`
}

// ItemReference is a driveItem's parentReference.
type ItemReference struct {
	DriveID string `json:"driveId,omitempty"`
	ID      string `json:"id,omitempty"`
	Path    string `json:"path,omitempty"`
}

// DriveItem is a file or folder as delta returns it.
type DriveItem struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name,omitempty"`
	ETag                 string         `json:"eTag,omitempty"`
	CTag                 string         `json:"cTag,omitempty"`
	Size                 int64          `json:"size,omitempty"`
	CreatedDateTime      *time.Time     `json:"createdDateTime,omitempty"`
	LastModifiedDateTime *time.Time     `json:"lastModifiedDateTime,omitempty"`
	ParentReference      *ItemReference `json:"parentReference,omitempty"`
	File                 *struct {
		MimeType string `json:"mimeType,omitempty"`
		Hashes   Hashes `json:"hashes"`
	} `json:"file,omitempty"`
	Folder *struct {
		ChildCount int `json:"childCount"`
	} `json:"folder,omitempty"`
	Package     *struct{} `json:"package,omitempty"`
	Root        *struct{} `json:"root,omitempty"`
	Deleted     *struct{} `json:"deleted,omitempty"`
	DownloadURL string    `json:"@microsoft.graph.downloadUrl,omitempty"`
}

func drivePath(driveID string) string { return "/drives/" + url.PathEscape(driveID) }

// escapePath escapes each segment of a '/'-separated path.
func escapePath(p string) string {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// UserDrive returns the user's OneDrive. A user without one is an *Error
// (404, or "mysite not found").
func (c *Client) UserDrive(ctx context.Context, userID string) (Drive, error) {
	var d Drive
	err := c.JSON(ctx, ScopeSharePoint, http.MethodGet, userPath(userID)+"/drive?$select=id,driveType", nil, nil, &d)
	return d, err
}

// drivePageSize is the delta page size asked for ($top, as Corso does).
const drivePageSize = 500

// DriveDelta runs the drive's root delta from deltaLink ("" for a full
// enumeration) and returns the new deltaLink. A reset is an *Error with
// status 410 (Location holds the restart URL) or code resyncRequired.
func (c *Client) DriveDelta(ctx context.Context, driveID, deltaLink string, fn func([]DriveItem) error) (string, error) {
	u := deltaLink
	if u == "" {
		u = fmt.Sprintf("%s/root/delta?$top=%d", drivePath(driveID), drivePageSize)
	}
	return pagesOf(ctx, c, ScopeSharePoint, u, nil, fn)
}

// DriveItem returns one item (with a fresh download URL).
func (c *Client) DriveItem(ctx context.Context, driveID, itemID string) (DriveItem, error) {
	var it DriveItem
	err := c.JSON(ctx, ScopeSharePoint, http.MethodGet, drivePath(driveID)+"/items/"+url.PathEscape(itemID), nil, nil, &it)
	return it, err
}

// DriveItemByPath returns the item at path below the drive root
// ("Restored …/a/b.txt").
func (c *Client) DriveItemByPath(ctx context.Context, driveID, path string) (DriveItem, error) {
	var it DriveItem
	err := c.JSON(ctx, ScopeSharePoint, http.MethodGet, drivePath(driveID)+"/root:/"+escapePath(path), nil, nil, &it)
	return it, err
}

// Download opens a pre-authenticated download URL (no Authorization).
// An expired URL is an *Error (401 or 403); the caller gets a fresh one
// with DriveItem and tries again. The body holds a SharePoint slot until
// it is closed.
func (c *Client) Download(ctx context.Context, url string) (io.ReadCloser, error) {
	resp, err := c.Do(ctx, ScopeSharePoint, &Request{
		Method: http.MethodGet, URL: url, NoAuth: true,
		Header: http.Header{"Accept": {"*/*"}}, // ranges answer 416 without it (research §3)
	})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// EnsureDriveFolder returns the child folder name of parentID ("root"
// for the drive root), creating it if missing.
func (c *Client) EnsureDriveFolder(ctx context.Context, driveID, parentID, name string) (DriveItem, error) {
	var it DriveItem
	children := drivePath(driveID) + "/items/" + url.PathEscape(parentID) + "/children"
	err := c.JSON(ctx, ScopeSharePoint, http.MethodPost, children, nil, map[string]any{
		"name":                              name,
		"folder":                            struct{}{},
		"@microsoft.graph.conflictBehavior": "fail",
	}, &it)
	if StatusOf(err) != http.StatusConflict {
		return it, err
	}
	var found *DriveItem
	_, lerr := pagesOf(ctx, c, ScopeSharePoint, children, nil, func(items []DriveItem) error {
		for i := range items {
			if strings.EqualFold(items[i].Name, name) && items[i].Folder != nil {
				found = &items[i]
			}
		}
		return nil
	})
	switch {
	case lerr != nil:
		return DriveItem{}, lerr
	case found == nil: // the name is taken by a file
		return DriveItem{}, err
	}
	return *found, nil
}

// UploadChunk is the upload-session chunk size: a multiple of 320 KiB
// (Graph requires it of every chunk but the last), 10 × 320 KiB.
const UploadChunk = 10 * 320 << 10

// UploadFile creates name under parentID through an upload session with
// conflictBehavior fail (an existing name is an *Error 409
// nameAlreadyExists), sending size bytes from r in UploadChunk pieces
// without Authorization, and returns the created item. An empty file,
// which has no byte range to send, is created with one PUT …/content.
func (c *Client) UploadFile(ctx context.Context, driveID, parentID, name string, size int64, r io.Reader) (DriveItem, error) {
	var it DriveItem
	item := drivePath(driveID) + "/items/" + url.PathEscape(parentID) + ":/" + url.PathEscape(name) + ":"
	if size == 0 {
		err := c.JSON(ctx, ScopeSharePoint, http.MethodPut,
			item+"/content?@microsoft.graph.conflictBehavior=fail", nil, nil, &it)
		return it, err
	}
	var session struct {
		UploadURL string `json:"uploadUrl"`
	}
	if err := c.JSON(ctx, ScopeSharePoint, http.MethodPost, item+"/createUploadSession", nil,
		map[string]any{"item": map[string]any{"@microsoft.graph.conflictBehavior": "fail"}}, &session); err != nil {
		return it, err
	}
	if session.UploadURL == "" {
		return it, fmt.Errorf("graph: drive upload session without uploadUrl")
	}
	final, err := c.uploadSession(ctx, ScopeSharePoint, session.UploadURL, size, r, UploadChunk)
	if err != nil {
		return it, err
	}
	if err := json.Unmarshal(final, &it); err != nil {
		return it, fmt.Errorf("graph: decoding uploaded item: %w", err)
	}
	return it, nil
}
