package m365

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
)

// driveNode is one drive item as the sync knows it.
type driveNode struct {
	id, parentID, name string
	folder, root, pkg  bool
	meta               FileMeta
	content            *blobstore.Content // files: stored or reused
	pending            *graph.DriveItem   // files: content to fetch
	failed             bool               // not stored: the previous version stays
	gone               bool               // deleted since the delta listed it
}

type driveRun struct {
	ctx     context.Context
	c       *graph.Client
	user    string
	driveID string
	w       *blobstore.Writer
	prog    *app.ProgressReporter
	ec      errContext
	nodes   map[string]*driveNode
	// known is every file of the previous snapshot by drive item id, for
	// content reuse after a reset.
	known   map[string]*driveNode
	prevIDs map[string]struct{}
	rootID  string

	mu     sync.Mutex
	failed []ItemFailure
}

// BackupDrive backs up one user's OneDrive incrementally from prev. Files
// are downloaded FetchWorkers at a time and hashed with quickXorHash while
// they are stored; a mismatch fails that file only (graph.hash_mismatch).
// A user without a drive is graph.mailbox_unavailable.
func BackupDrive(ctx context.Context, c *graph.Client, userID string, w *blobstore.Writer, prev []blobstore.Item, progress Progress) (*BackupResult, error) {
	r := &driveRun{ctx: ctx, c: c, user: userID, w: w, prog: app.NewProgressReporter(progress),
		ec: errContext{permission: permFiles, mailbox: userID}}
	res, err := r.run(prev)
	if err != nil {
		return nil, failure(c, r.ec, err)
	}
	return res, nil
}

func (r *driveRun) run(prev []blobstore.Item) (*BackupResult, error) {
	r.prog.Phase("scanning")
	d, err := r.c.UserDrive(r.ctx, r.user)
	if err != nil {
		if graph.StatusOf(err) == http.StatusNotFound || graph.IsCode(err, "ResourceNotFound", "itemNotFound") {
			return nil, app.Fail(CodeMailboxUnavailable, map[string]any{"mailbox": r.user}, err)
		}
		return nil, err
	}
	r.driveID = d.ID
	deltaLink := r.loadPrev(prev)
	if deltaLink == "" {
		r.nodes = map[string]*driveNode{}
	}
	link, err := r.c.DriveDelta(r.ctx, r.driveID, deltaLink, r.apply)
	if err != nil && invalidDelta(err) && deltaLink != "" {
		r.nodes = map[string]*driveNode{}
		link, err = r.c.DriveDelta(r.ctx, r.driveID, "", r.apply)
	}
	if err != nil {
		return nil, err
	}
	if root := r.nodes[r.rootID]; root != nil {
		root.meta.DeltaLink, root.meta.DriveID = link, r.driveID
	}
	paths := r.paths()
	r.prog.Phase("transferring")
	if err := r.download(paths); err != nil {
		return nil, err
	}
	return r.result(paths), nil
}

// loadPrev rebuilds the id map from the previous manifest and returns the
// deltaLink to start from ("" for a full enumeration).
func (r *driveRun) loadPrev(prev []blobstore.Item) string {
	r.nodes, r.known, r.prevIDs = map[string]*driveNode{}, map[string]*driveNode{}, map[string]struct{}{}
	link := ""
	for _, it := range prev {
		var fm FileMeta
		if (it.Kind != KindFile && it.Kind != KindFolder) || json.Unmarshal(it.Meta, &fm) != nil || fm.DriveItemID == "" {
			continue
		}
		n := &driveNode{id: fm.DriveItemID, parentID: fm.ParentID, name: it.Name, folder: it.Kind == KindFolder, meta: fm}
		if fm.DeltaLink != "" || (it.Kind == KindFolder && it.Path == "" && fm.ParentID == "") {
			n.root = true
			if fm.DriveID == r.driveID {
				link = fm.DeltaLink
				r.rootID = n.id
			}
		}
		if it.Kind == KindFile {
			c := it.Content
			n.content = &c
			k := *n // a copy: apply updates the node, the reuse check compares with this
			r.known[n.id] = &k
			r.prevIDs[it.ID] = struct{}{}
		}
		r.nodes[n.id] = n
	}
	return link
}

// apply merges a delta page: the last entry of an id wins; a deleted entry
// removes the item (its children go with it when paths are computed).
func (r *driveRun) apply(page []graph.DriveItem) error {
	for i := range page {
		d := page[i]
		if d.Deleted != nil {
			delete(r.nodes, d.ID)
			continue
		}
		n := r.nodes[d.ID]
		if n == nil {
			n = &driveNode{id: d.ID}
			r.nodes[d.ID] = n
		}
		if d.Name != "" {
			n.name = d.Name
		}
		if d.ParentReference != nil && d.ParentReference.ID != "" {
			n.parentID = d.ParentReference.ID
		}
		n.root, n.folder, n.pkg = d.Root != nil, d.Folder != nil || d.Root != nil, d.Package != nil
		if n.root {
			r.rootID, n.parentID, n.name = d.ID, "", ""
		}
		n.meta = FileMeta{DriveItemID: d.ID, ParentID: n.parentID, CTag: d.CTag, ETag: d.ETag,
			Modified: d.LastModifiedDateTime}
		if d.File == nil || n.folder || n.pkg {
			n.content, n.pending = nil, nil
			continue
		}
		n.meta.QuickXorHash = d.File.Hashes.QuickXorHash
		if k := r.known[d.ID]; k != nil && k.content != nil &&
			((d.CTag != "" && k.meta.CTag == d.CTag) || (d.File.Hashes.QuickXorHash != "" && k.meta.QuickXorHash == d.File.Hashes.QuickXorHash)) {
			n.content, n.pending = k.content, nil
			continue
		}
		cp := d
		n.content, n.pending = nil, &cp
	}
	return nil
}

// paths computes every reachable item's folder path: a folder's own path,
// or the path of the folder a file is in. Items whose parent chain does not
// reach the root, or passes through a package, are left out.
func (r *driveRun) paths() map[string]string {
	out := map[string]string{}
	state := map[string]int{} // 1 visiting, 2 done
	var walk func(id string) (string, bool)
	walk = func(id string) (string, bool) {
		n := r.nodes[id]
		if n == nil || n.pkg {
			return "", false
		}
		if n.root {
			return "", true
		}
		if state[id] == 1 {
			return "", false // a cycle: never from Graph
		}
		if p, ok := out[id]; ok || state[id] == 2 {
			return p, ok
		}
		state[id] = 1
		parent, ok := walk(n.parentID)
		state[id] = 2
		if !ok || !r.nodes[n.parentID].folder {
			return "", false
		}
		p := n.name
		if parent != "" {
			p = parent + "/" + n.name
		}
		out[id] = p
		return p, true
	}
	for id := range r.nodes {
		walk(id)
	}
	return out
}

// download fetches the pending files, FetchWorkers at a time.
func (r *driveRun) download(paths map[string]string) error {
	var todo []*driveNode
	for id, n := range r.nodes {
		if _, ok := paths[id]; ok && n.pending != nil {
			todo = append(todo, n)
			r.prog.AddTotals(1, n.pending.Size)
		}
	}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	jobs := make(chan *driveNode)
	var wg sync.WaitGroup
	var fatal error
	var once sync.Once
	for range max(FetchWorkers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				if ctx.Err() != nil {
					continue
				}
				err := r.fetch(ctx, n)
				switch {
				case err == nil:
				case itemGone(err):
					n.gone = true
				case errors.As(err, new(storeError)) || mailboxWide(failure(r.c, r.ec, err)):
					once.Do(func() { fatal = err; cancel() })
				default:
					n.failed = true
					p := paths[n.id]
					r.mu.Lock()
					r.failed = append(r.failed, ItemFailure{ItemID: DriveItemID(n.id), Ref: p, Err: failure(r.c, r.ec, err)})
					r.mu.Unlock()
				}
			}
		}()
	}
	for _, n := range todo {
		select {
		case jobs <- n:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if fatal != nil {
		return fatal
	}
	return r.ctx.Err()
}

// testHookBeforeDownload lets tests let a download URL expire.
var testHookBeforeDownload func()

// fetch downloads one file into the store, with a fresh download URL when
// the delta's has expired, and checks its quickXorHash.
func (r *driveRun) fetch(ctx context.Context, n *driveNode) error {
	d := n.pending
	if d.DownloadURL == "" {
		fresh, err := r.c.DriveItem(ctx, r.driveID, n.id)
		if err != nil {
			return err
		}
		d = &fresh
	}
	if testHookBeforeDownload != nil {
		testHookBeforeDownload()
	}
	body, err := r.c.Download(ctx, d.DownloadURL)
	if s := graph.StatusOf(err); s == http.StatusUnauthorized || s == http.StatusForbidden || s == http.StatusGone {
		fresh, ferr := r.c.DriveItem(ctx, r.driveID, n.id)
		if ferr != nil {
			return ferr
		}
		d = &fresh
		body, err = r.c.Download(ctx, d.DownloadURL)
	}
	if err != nil {
		return err
	}
	defer body.Close()
	qx := graph.NewQuickXorHash()
	src := &sourceReader{r: io.TeeReader(body, qx)}
	c, err := r.w.PutItem(ctx, src)
	if err != nil {
		if src.err != nil {
			return src.err
		}
		return storeError{err}
	}
	got := base64.StdEncoding.EncodeToString(qx.Sum(nil))
	want := ""
	if d.File != nil {
		want = d.File.Hashes.QuickXorHash
	}
	if want != "" && got != want {
		return app.Fail(CodeHashMismatch, map[string]any{"mailbox": r.user, "path": n.name, "expected": want, "actual": got},
			fmt.Errorf("downloaded content hashes to %s, Graph reports %s", got, want))
	}
	n.meta.QuickXorHash = got
	if d.CTag != "" {
		n.meta.CTag = d.CTag
	}
	n.content = &c
	r.prog.AddDone(1, c.Size)
	return nil
}

// result is the manifest: the root's folder item first, then every folder
// by path followed by its files by name.
func (r *driveRun) result(paths map[string]string) *BackupResult {
	res := &BackupResult{Failed: r.failed}
	type entry struct {
		folderPath string
		folder     bool
		it         blobstore.Item
	}
	var entries []entry
	if root := r.nodes[r.rootID]; root != nil {
		raw, _ := json.Marshal(root.meta)
		res.Items = append(res.Items, blobstore.Item{ID: DriveItemID(root.id), Kind: KindFolder, Meta: raw})
	}
	for id, p := range paths {
		n := r.nodes[id]
		if n.folder {
			raw, _ := json.Marshal(n.meta)
			entries = append(entries, entry{folderPath: p, folder: true,
				it: blobstore.Item{ID: DriveItemID(id), Kind: KindFolder, Path: p, Name: n.name, Meta: raw}})
			continue
		}
		c, meta := n.content, n.meta
		if n.gone {
			continue
		}
		if c == nil || n.failed {
			k := r.known[id]
			if k == nil || k.content == nil || !n.failed {
				continue
			}
			c, meta = k.content, k.meta // the previous version stays; retried next time
			meta.ParentID = n.parentID
		}
		raw, _ := json.Marshal(meta)
		dir := parentPath(p)
		entries = append(entries, entry{folderPath: dir,
			it: blobstore.Item{ID: DriveItemID(id), Kind: KindFile, Path: dir, Name: n.name, Content: *c, Meta: raw}})
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.folderPath != b.folderPath {
			return a.folderPath < b.folderPath
		}
		if a.folder != b.folder {
			return a.folder
		}
		return a.it.Name < b.it.Name
	})
	seen := map[string]struct{}{}
	for _, e := range entries {
		res.Items = append(res.Items, e.it)
		if e.it.Kind != KindFile {
			continue
		}
		seen[e.it.ID] = struct{}{}
		res.Count++
		if _, ok := r.prevIDs[e.it.ID]; !ok {
			res.Added++
		}
	}
	for id := range r.prevIDs {
		if _, ok := seen[id]; !ok {
			res.Removed++
		}
	}
	r.prog.Flush()
	return res
}

func parentPath(p string) string {
	if i := len(p) - len(lastSegment(p)); i > 0 {
		return p[:i-1]
	}
	return ""
}
