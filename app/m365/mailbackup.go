package m365

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
)

// FetchWorkers is how many messages or files of one mailbox or drive are
// fetched at once. The client holds requests to Outlook's 4 in flight per
// mailbox; more workers would only queue there.
var FetchWorkers = 4

// mailMessage is one message of a folder as the sync sees it: what its
// MessageMeta will say, held compactly (50 mailboxes at once hold tens of
// thousands of these); the meta is encoded once, for the manifest.
type mailMessage struct {
	graphID           string
	internetMessageID string
	subject           string
	from              string
	changeKey         string
	categories        []string
	received, sent    time.Time          // when hasReceived, hasSent
	content           *blobstore.Content // nil until stored or known
	// prev is the message's item in the previous snapshot; while no
	// delta entry touched the message (dirty false) it is carried over
	// as it is, without encoding its meta again. prevChangeKey is the
	// change key it had then; neither changes during the backup.
	prev          *blobstore.Item
	prevChangeKey string

	hasReceived, hasSent bool
	isRead, flagged      bool
	dirty                bool
	failed               bool // could not be read: the previous version stays
	gone                 bool // deleted since it was listed
}

// setMeta takes a previous snapshot's meta.
func (m *mailMessage) setMeta(mm *MessageMeta) {
	m.graphID, m.internetMessageID, m.subject, m.from = mm.GraphID, mm.InternetMessageID, mm.Subject, mm.From
	m.changeKey, m.categories, m.isRead, m.flagged = mm.ChangeKey, mm.Categories, mm.IsRead, mm.Flagged
	if mm.ReceivedDateTime != nil {
		m.received, m.hasReceived = mm.ReceivedDateTime.UTC(), true
	}
	if mm.SentDateTime != nil {
		m.sent, m.hasSent = mm.SentDateTime.UTC(), true
	}
}

// metaJSON is the message's MessageMeta, encoded.
func (m *mailMessage) metaJSON(folderID, changeKey string) json.RawMessage {
	mm := MessageMeta{GraphID: m.graphID, FolderID: folderID, InternetMessageID: m.internetMessageID,
		Subject: m.subject, From: m.from, IsRead: m.isRead, Flagged: m.flagged, Categories: m.categories,
		ChangeKey: changeKey}
	if m.hasReceived {
		mm.ReceivedDateTime = &m.received
	}
	if m.hasSent {
		mm.SentDateTime = &m.sent
	}
	switch {
	case m.hasSent:
		mm.Date = m.sent.Format(time.RFC3339)
	case m.hasReceived:
		mm.Date = m.received.Format(time.RFC3339)
	}
	raw, _ := json.Marshal(&mm)
	return raw
}

// prevMailbox is the previous snapshot indexed for an incremental.
type prevMailbox struct {
	folders map[string]FolderMeta              // by folder id
	msgs    map[string]map[string]*mailMessage // folder id → graph id → message
	byGraph map[string]*mailMessage            // graph id → message, for content reuse
	itemIDs map[string]struct{}                // message item ids
}

func indexPrevMailbox(prev []blobstore.Item) *prevMailbox {
	p := &prevMailbox{folders: map[string]FolderMeta{}, msgs: map[string]map[string]*mailMessage{},
		byGraph: map[string]*mailMessage{}, itemIDs: map[string]struct{}{}}
	for i := range prev {
		it := &prev[i]
		switch it.Kind {
		case KindFolder:
			var fm FolderMeta
			if json.Unmarshal(it.Meta, &fm) == nil && fm.FolderID != "" {
				p.folders[fm.FolderID] = fm
			}
		case KindMessage:
			var mm MessageMeta
			if json.Unmarshal(it.Meta, &mm) != nil || mm.GraphID == "" {
				continue
			}
			p.itemIDs[it.ID] = struct{}{}
			m := p.msgs[mm.FolderID]
			if m == nil {
				m = map[string]*mailMessage{}
				p.msgs[mm.FolderID] = m
			}
			msg := &mailMessage{content: &it.Content, prev: it, prevChangeKey: mm.ChangeKey}
			msg.setMeta(&mm)
			m[mm.GraphID] = msg
			p.byGraph[mm.GraphID] = msg
		}
	}
	return p
}

// mailFolderState is one folder of this backup.
type mailFolderState struct {
	folder graph.MailFolder
	path   string
	meta   FolderMeta
	mu     sync.Mutex
	msgs   map[string]*mailMessage
}

type mailRun struct {
	ctx    context.Context
	c      *graph.Client
	user   string
	w      *blobstore.Writer
	prev   *prevMailbox
	prog   *app.ProgressReporter
	ec     errContext
	jobs   chan fetchJob
	wg     sync.WaitGroup
	mu     sync.Mutex
	failed []ItemFailure
	fatal  error
	cancel context.CancelFunc
	// counters for tests
	fetched int64
}

type fetchJob struct {
	f *mailFolderState
	m *mailMessage
}

// BackupMailbox backs up one user's mailbox incrementally from prev (the
// previous snapshot's manifest; nil for a full backup). It stores each new
// or changed message's MIME through w, FetchWorkers at a time, and returns
// the manifest without committing it. A message that cannot be read is in
// Failed (its previous version, if any, stays in the manifest); failures
// of the whole mailbox (graph.mailbox_unavailable, graph.consent_missing,
// graph.throttled, graph.auth_failed, the store's) end the backup.
func BackupMailbox(ctx context.Context, c *graph.Client, userID string, w *blobstore.Writer, prev []blobstore.Item, progress Progress) (*BackupResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &mailRun{ctx: ctx, c: c, user: userID, w: w, prev: indexPrevMailbox(prev), prog: app.NewProgressReporter(progress),
		ec: errContext{permission: permMail, mailbox: userID}, jobs: make(chan fetchJob), cancel: cancel}
	res, err := r.run()
	if err != nil {
		return nil, failure(c, r.ec, err)
	}
	return res, nil
}

func (r *mailRun) run() (*BackupResult, error) {
	r.prog.Phase("scanning")
	var folders []*mailFolderState
	err := r.c.MailFolders(r.ctx, r.user, func(f graph.MailFolder, path []string) error {
		if f.IsSearchFolder() {
			return nil
		}
		segs := make([]string, len(path))
		for i, s := range path {
			segs[i] = EscapeName(s)
		}
		folders = append(folders, &mailFolderState{folder: f, path: strings.Join(segs, "/"),
			meta: FolderMeta{FolderID: f.ID, ParentFolderID: f.ParentFolderID}})
		r.prog.AddTotals(int64(f.TotalItemCount), 0)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.prog.Phase("transferring")
	for range max(FetchWorkers, 1) {
		r.wg.Add(1)
		go r.fetcher()
	}
	for _, f := range folders {
		if err := r.syncFolder(f); err != nil {
			r.setFatal(err)
			break
		}
	}
	close(r.jobs)
	r.wg.Wait()
	if r.fatal != nil {
		return nil, r.fatal
	}
	return r.result(folders), nil
}

func (r *mailRun) setFatal(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fatal == nil {
		r.fatal = err
		r.cancel()
	}
}

// syncFolder brings one folder's message list up to date (delta, else a
// listing) and hands the messages whose MIME is needed to the fetchers.
func (r *mailRun) syncFolder(f *mailFolderState) error {
	pm, hadPrev := r.prev.folders[f.folder.ID]
	start := ""
	f.msgs = nil
	if hadPrev && pm.DeltaLink != "" {
		// The previous messages themselves: this folder's sync is the
		// only one to change them (byGraph reads only prev and
		// prevChangeKey, which stay).
		start = pm.DeltaLink
		f.msgs = r.prev.msgs[f.folder.ID]
		delete(r.prev.msgs, f.folder.ID)
	}
	if f.msgs == nil {
		f.msgs = map[string]*mailMessage{}
	}
	apply := func(page []graph.Message) error {
		for _, m := range page {
			if m.Removed != nil {
				delete(f.msgs, m.ID)
				continue
			}
			f.apply(m)
		}
		return nil
	}
	link, err := r.c.MessagesDelta(r.ctx, r.user, f.folder.ID, start, apply)
	if err != nil && invalidDelta(err) {
		f.msgs = map[string]*mailMessage{}
		link, err = r.c.MessagesDelta(r.ctx, r.user, f.folder.ID, "", apply)
	}
	if err != nil && graph.IsCode(err, "ErrorQuotaExceeded") {
		f.msgs = map[string]*mailMessage{}
		link, err = "", r.c.ListMessages(r.ctx, r.user, f.folder.ID, apply)
	}
	if err != nil {
		return err
	}
	f.meta.DeltaLink = link

	var todo []*mailMessage
	for id, m := range f.msgs {
		if old, ok := r.prev.byGraph[id]; ok && old.prevChangeKey == m.changeKey {
			m.content = &old.prev.Content
			r.prog.AddDone(1, 0)
			continue
		}
		m.content = nil
		todo = append(todo, m)
	}
	for _, m := range todo {
		select {
		case r.jobs <- fetchJob{f: f, m: m}:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
	return nil
}

// apply merges a delta or list entry into the folder's messages: an entry
// for a known id updates what it carries (the last entry wins).
func (f *mailFolderState) apply(m graph.Message) {
	cur := f.msgs[m.ID]
	if cur == nil {
		cur = &mailMessage{graphID: m.ID}
		f.msgs[m.ID] = cur
	}
	cur.dirty = true
	if m.InternetMessageID != "" {
		cur.internetMessageID = m.InternetMessageID
	}
	if m.Subject != "" {
		cur.subject = m.Subject
	}
	if m.From != nil {
		cur.from = formatAddress(m.From)
	}
	if m.ReceivedDateTime != nil {
		cur.received, cur.hasReceived = m.ReceivedDateTime.UTC(), true
	}
	if m.SentDateTime != nil {
		cur.sent, cur.hasSent = m.SentDateTime.UTC(), true
	}
	if m.IsRead != nil {
		cur.isRead = *m.IsRead
	}
	if m.Flag != nil {
		cur.flagged = m.Flag.FlagStatus == "flagged"
	}
	if m.Categories != nil {
		cur.categories = m.Categories
	}
	if m.ChangeKey != "" {
		cur.changeKey = m.ChangeKey
	}
}

func formatAddress(r *graph.Recipient) string {
	if r == nil {
		return ""
	}
	if r.EmailAddress.Name == "" || r.EmailAddress.Name == r.EmailAddress.Address {
		return r.EmailAddress.Address
	}
	return fmt.Sprintf("%s <%s>", r.EmailAddress.Name, r.EmailAddress.Address)
}

func (r *mailRun) fetcher() {
	defer r.wg.Done()
	for j := range r.jobs {
		if r.ctx.Err() != nil {
			continue
		}
		c, err := r.fetch(j.m.graphID)
		switch {
		case err == nil:
			j.f.mu.Lock()
			j.m.content = &c
			j.f.mu.Unlock()
			r.prog.AddDone(1, c.Size)
		case itemGone(err):
			j.f.mu.Lock()
			j.m.gone = true // deleted meanwhile: the next delta says so
			j.f.mu.Unlock()
		case errors.As(err, new(storeError)) || mailboxWide(failure(r.c, r.ec, err)):
			r.setFatal(err)
		default:
			j.f.mu.Lock()
			j.m.failed = true
			j.f.mu.Unlock()
			r.addFailure(ItemFailure{ItemID: MessageItemID(j.m.graphID), Ref: j.f.path + "/" + j.m.subject,
				Err: failure(r.c, r.ec, err)})
		}
	}
}

func (r *mailRun) addFailure(f ItemFailure) {
	r.mu.Lock()
	r.failed = append(r.failed, f)
	r.mu.Unlock()
}

// fetch stores one message's MIME. A read error is the source's; any
// other error of PutItem is the store's (and wrapped as such).
func (r *mailRun) fetch(graphID string) (blobstore.Content, error) {
	body, err := r.c.MessageMIME(r.ctx, r.user, graphID)
	if err != nil {
		return blobstore.Content{}, err
	}
	defer body.Close()
	src := &sourceReader{r: body}
	c, err := r.w.PutItem(r.ctx, src)
	if err != nil {
		if src.err != nil {
			return blobstore.Content{}, src.err
		}
		return blobstore.Content{}, storeError{err}
	}
	return c, nil
}

// sourceReader remembers the source's read error, to tell it from the
// store's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// storeError marks an error of the blob store: it ends the backup.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// result builds the manifest: folders by path, each followed by its
// messages by received time. A message that failed keeps its previous
// version when it had one.
func (r *mailRun) result(folders []*mailFolderState) *BackupResult {
	sort.SliceStable(folders, func(i, j int) bool { return folders[i].path < folders[j].path })
	n := len(folders)
	for _, f := range folders {
		n += len(f.msgs)
	}
	res := &BackupResult{Failed: r.failed, Items: make([]blobstore.Item, 0, n)}
	seen := make(map[string]struct{}, n)
	type sortable struct {
		m        *mailMessage
		itemID   string
		received time.Time
	}
	var msgs []sortable
	for _, f := range folders {
		raw, _ := json.Marshal(f.meta)
		res.Items = append(res.Items, blobstore.Item{ID: MailFolderItemID(f.folder.ID), Kind: KindFolder,
			Path: f.path, Name: f.folder.DisplayName, Meta: raw})
		msgs = msgs[:0]
		for _, m := range f.msgs {
			s := sortable{m: m, itemID: MessageItemID(m.graphID)}
			if m.hasReceived {
				s.received = m.received
			}
			msgs = append(msgs, s)
		}
		sort.Slice(msgs, func(i, j int) bool {
			if a, b := msgs[i].received, msgs[j].received; !a.Equal(b) {
				return a.Before(b)
			}
			return msgs[i].itemID < msgs[j].itemID
		})
		for _, s := range msgs {
			m := s.m
			c := m.content
			changeKey := m.changeKey
			if m.gone {
				continue
			}
			if c == nil || m.failed {
				old, ok := r.prev.byGraph[m.graphID]
				if !ok || !m.failed {
					continue
				}
				c = &old.prev.Content
				changeKey = old.prevChangeKey // fetched again next time
			}
			itemID := s.itemID
			if _, dup := seen[itemID]; dup { // moved while the folders were read
				continue
			}
			seen[itemID] = struct{}{}
			if !m.dirty && m.prev != nil && m.prev.Path == f.path && m.prev.ID == itemID && c == m.content && !m.failed {
				res.Items = append(res.Items, *m.prev)
			} else {
				res.Items = append(res.Items, blobstore.Item{ID: itemID, Kind: KindMessage, Path: f.path,
					Name: m.subject, Content: *c, Meta: m.metaJSON(f.folder.ID, changeKey)})
			}
		}
		f.msgs = nil // the folder's state is in the manifest now
	}
	clear(msgs)
	for _, it := range res.Items {
		if it.Kind != KindMessage {
			continue
		}
		res.Count++
		if _, ok := r.prev.itemIDs[it.ID]; !ok {
			res.Added++
		}
	}
	for id := range r.prev.itemIDs {
		if _, ok := seen[id]; !ok {
			res.Removed++
		}
	}
	r.prog.Flush()
	return res
}
