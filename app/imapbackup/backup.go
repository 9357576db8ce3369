package imapbackup

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"backstop/app"
	"backstop/app/blobstore"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Fetch batching: one UID FETCH asks for at most batchMessages messages or
// batchBytes bytes, which bounds what a dropped connection costs.
const (
	batchMessages = 2000
	batchBytes    = 64 << 20
	// Messages up to bufferedMax bytes are read off the socket into a
	// buffer and stored by a worker, so storing (hashing, compressing,
	// encrypting) overlaps reading; larger ones stream straight into the
	// store from the socket.
	bufferedMax = 256 << 10
)

// folderState is a folder as LIST and STATUS show it now.
type folderState struct {
	mailbox string
	delim   rune
	path    string
	status  imap.StatusData
}

// prevFolder is what the previous snapshot holds of a folder.
type prevFolder struct {
	meta FolderMeta
	ok   bool // a folder item with readable meta was found
	msgs []blobstore.Item
}

// Backup stores every selectable folder of the account through w and
// returns the snapshot's manifest (it does not commit: the caller does,
// with the result's Items). prev is the previous snapshot's manifest (nil
// for a first backup). A folder whose UIDVALIDITY, UIDNEXT, message count
// and (with CONDSTORE) HIGHESTMODSEQ are unchanged is carried over from
// prev without any further command. A message the server cannot return is
// listed in Failed and left out; the backup goes on.
func Backup(ctx context.Context, a Account, w *blobstore.Writer, prev []blobstore.Item, progress Progress) (*BackupResult, error) {
	s, err := connect(ctx, a)
	if err != nil {
		return nil, err
	}
	defer s.close()
	b := &backupRun{s: s, w: w, ctx: ctx, condstore: s.caps.Has(imap.CapCondStore)}
	b.prog = app.NewProgressReporter(progress)
	res, err := b.run(prev)
	if err != nil {
		return nil, classify(ctx, a, err)
	}
	return res, nil
}

type backupRun struct {
	ctx       context.Context
	s         *session
	w         *blobstore.Writer
	condstore bool
	prog      *app.ProgressReporter
	failed    []ItemFailure
	fetches   int // UID FETCH commands sent for bodies (tests count them)
}

func (b *backupRun) run(prev []blobstore.Item) (*BackupResult, error) {
	b.prog.Phase("scanning")
	folders, err := b.listFolders()
	if err != nil {
		return nil, err
	}
	prevByPath := indexPrevious(prev)
	var total int64
	for _, f := range folders {
		if f.status.NumMessages != nil {
			total += int64(*f.status.NumMessages)
		}
	}
	b.prog.SetTotals(total, 0)
	b.prog.Phase("transferring")

	res := &BackupResult{}
	prevIDs := make(map[string]struct{}, len(prev))
	for _, it := range prev {
		if it.Kind == KindMessage {
			prevIDs[it.ID] = struct{}{}
		}
	}
	for _, f := range folders {
		pf := prevByPath[f.path]
		meta := FolderMeta{Delimiter: delimString(f.delim), UIDValidity: f.status.UIDValidity,
			UIDNext: uint32(f.status.UIDNext), HighestModSeq: f.status.HighestModSeq, Mailbox: f.mailbox}
		if f.status.NumMessages != nil {
			meta.Messages = *f.status.NumMessages
		}
		var msgs []blobstore.Item
		if pf != nil && pf.ok && unchanged(pf.meta, meta, b.condstore) {
			msgs = pf.msgs
			b.prog.AddDone(int64(len(msgs)), 0)
		} else {
			msgs, err = b.syncFolder(f, pf)
			if err != nil {
				return nil, err
			}
		}
		raw, _ := json.Marshal(meta)
		res.Items = append(res.Items, blobstore.Item{ID: FolderItemID(f.path), Kind: KindFolder, Path: f.path,
			Name: lastSegment(f.path), Meta: raw})
		res.Items = append(res.Items, msgs...)
	}
	cur := make(map[string]struct{}, len(res.Items))
	for _, it := range res.Items {
		if it.Kind != KindMessage {
			continue
		}
		res.Messages++
		cur[it.ID] = struct{}{}
		if _, ok := prevIDs[it.ID]; !ok {
			res.Added++
		}
	}
	for id := range prevIDs {
		if _, ok := cur[id]; !ok {
			res.Removed++
		}
	}
	res.Failed = b.failed
	b.prog.Flush()
	return res, nil
}

func delimString(d rune) string {
	if d == 0 {
		return ""
	}
	return string(d)
}

// unchanged says whether a folder can be carried over without looking
// inside. Without CONDSTORE a flag change leaves no trace in STATUS, so
// such a folder is always listed (one cheap FLAGS fetch).
func unchanged(prev, cur FolderMeta, condstore bool) bool {
	return condstore && prev.HighestModSeq != 0 && prev.UIDValidity == cur.UIDValidity &&
		prev.UIDNext == cur.UIDNext && prev.Messages == cur.Messages && prev.HighestModSeq == cur.HighestModSeq
}

// indexPrevious groups the previous manifest by folder path.
func indexPrevious(prev []blobstore.Item) map[string]*prevFolder {
	out := map[string]*prevFolder{}
	get := func(p string) *prevFolder {
		pf := out[p]
		if pf == nil {
			pf = &prevFolder{}
			out[p] = pf
		}
		return pf
	}
	for _, it := range prev {
		switch it.Kind {
		case KindFolder:
			pf := get(it.Path)
			pf.ok = json.Unmarshal(it.Meta, &pf.meta) == nil
		case KindMessage:
			pf := get(it.Path)
			pf.msgs = append(pf.msgs, it)
		}
	}
	return out
}

// listFolders lists every selectable folder with its status: one LIST
// with RETURN (STATUS …) where the server has LIST-STATUS, else a LIST and
// STATUS commands sent together and then read.
func (b *backupRun) listFolders() ([]folderState, error) {
	sopts := &imap.StatusOptions{NumMessages: true, UIDNext: true, UIDValidity: true, HighestModSeq: b.condstore}
	listStatus := b.s.caps.Has(imap.CapListStatus)
	lopts := &imap.ListOptions{}
	if listStatus {
		lopts.ReturnStatus = sopts
	}
	list, err := b.s.c.List("", "*", lopts).Collect()
	if err != nil {
		return nil, err
	}
	var folders []folderState
	var pending []*imapclient.StatusCommand
	for _, l := range list {
		if slices.ContainsFunc(l.Attrs, func(a imap.MailboxAttr) bool {
			return strings.EqualFold(string(a), string(imap.MailboxAttrNoSelect)) ||
				strings.EqualFold(string(a), string(imap.MailboxAttrNonExistent))
		}) {
			continue
		}
		f := folderState{mailbox: l.Mailbox, delim: l.Delim, path: folderPath(l.Mailbox, l.Delim)}
		if l.Status != nil {
			f.status = *l.Status
		} else {
			pending = append(pending, b.s.c.Status(l.Mailbox, sopts))
		}
		folders = append(folders, f)
	}
	j := 0
	for i := range folders {
		if folders[i].status.UIDValidity != 0 {
			continue
		}
		st, err := pending[j].Wait()
		j++
		if err != nil {
			return nil, err
		}
		folders[i].status = *st
	}
	sort.Slice(folders, func(i, j int) bool { return folders[i].path < folders[j].path })
	return folders, nil
}

// listed is what a listing says of one message.
type listed struct {
	size   int64
	flags  []string
	modseq uint64
	has    bool // flags were listed
}

// syncFolder brings one changed (or new) folder up to date: it lists what
// is there, keeps the previous items still present (with new flags), and
// fetches the new messages.
func (b *backupRun) syncFolder(f folderState, pf *prevFolder) ([]blobstore.Item, error) {
	sel, err := b.s.c.Select(f.mailbox, &imap.SelectOptions{ReadOnly: true, CondStore: b.condstore}).Wait()
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) { // gone between LIST and SELECT: an empty folder now
			return nil, nil
		}
		return nil, err
	}
	known := map[uint32]blobstore.Item{}
	var oldNext uint32 = 1
	var oldModSeq uint64
	if pf != nil && pf.ok && pf.meta.UIDValidity == sel.UIDValidity {
		for _, it := range pf.msgs {
			var m MessageMeta
			if json.Unmarshal(it.Meta, &m) == nil && m.UIDValidity == sel.UIDValidity {
				known[m.UID] = it
			}
		}
		oldNext = pf.meta.UIDNext
		oldModSeq = pf.meta.HighestModSeq
	}
	if sel.NumMessages == 0 {
		b.s.c.Unselect().Wait()
		return nil, nil
	}
	list, err := b.listFolder(len(known) > 0, oldNext, oldModSeq)
	if err != nil {
		return nil, err
	}

	var out []blobstore.Item
	for uid, it := range known {
		l, present := list[uid]
		if !present {
			continue // expunged
		}
		if l.has {
			var m MessageMeta
			json.Unmarshal(it.Meta, &m)
			if !slices.Equal(m.Flags, l.flags) || (l.modseq != 0 && m.ModSeq != l.modseq) {
				m.Flags = l.flags
				if l.modseq != 0 {
					m.ModSeq = l.modseq
				}
				it.Meta, _ = json.Marshal(m)
			}
		}
		out = append(out, it)
	}
	b.prog.AddDone(int64(len(out)), 0)
	var todo []uint32
	var todoBytes int64
	for uid, l := range list {
		if _, ok := known[uid]; !ok {
			todo = append(todo, uid)
			todoBytes += l.size
		}
	}
	slices.Sort(todo)
	b.prog.AddTotals(0, todoBytes)
	fetched, err := b.fetchMessages(f, sel.UIDValidity, todo, list)
	if err != nil {
		return nil, err
	}
	out = append(out, fetched...)
	sort.Slice(out, func(i, j int) bool { return uidOf(out[i]) < uidOf(out[j]) })
	b.s.c.Unselect().Wait()
	return out, nil
}

func uidOf(it blobstore.Item) uint32 {
	var m struct {
		UID uint32 `json:"uid"`
	}
	json.Unmarshal(it.Meta, &m)
	return m.UID
}

// listFolder lists the selected folder's messages: every UID present with
// its size, and flags where they may have changed. With CONDSTORE and a
// previous state it sends three commands at once (the UIDs present, the
// flags changed since the last modseq, the sizes of new UIDs) and reads
// the answers after; otherwise one UID FETCH 1:* (UID FLAGS RFC822.SIZE).
func (b *backupRun) listFolder(incremental bool, oldNext uint32, oldModSeq uint64) (map[uint32]listed, error) {
	out := map[uint32]listed{}
	if !(incremental && b.condstore && oldModSeq != 0) {
		return out, b.collectListing(b.s.c.Fetch(allUIDs(1), &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true, ModSeq: b.condstore}), out, 0)
	}
	search := b.s.c.UIDSearch(&imap.SearchCriteria{}, &imap.SearchOptions{ReturnAll: true})
	var changed *imapclient.FetchCommand
	if oldNext > 1 {
		var old imap.UIDSet
		old.AddRange(1, imap.UID(oldNext-1))
		changed = b.s.c.Fetch(old, &imap.FetchOptions{UID: true, Flags: true, ModSeq: true, ChangedSince: oldModSeq})
	}
	fresh := b.s.c.Fetch(allUIDs(oldNext), &imap.FetchOptions{UID: true, RFC822Size: true})
	// The answers may come interleaved (Dovecot runs commands in
	// parallel), and go-imap hands each FETCH's messages to a channel of
	// its own: read them all at once.
	var wg sync.WaitGroup
	changedList, freshList := map[uint32]listed{}, map[uint32]listed{}
	var changedErr, freshErr error
	if changed != nil {
		wg.Add(1)
		go func() { defer wg.Done(); changedErr = b.collectListing(changed, changedList, 0) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); freshErr = b.collectListing(fresh, freshList, oldNext) }()
	sd, err := search.Wait()
	wg.Wait()
	for _, e := range []error{err, changedErr, freshErr} {
		if e != nil {
			return nil, e
		}
	}
	for _, uid := range sd.AllUIDs() {
		out[uint32(uid)] = listed{}
	}
	for uid, l := range changedList {
		if _, ok := out[uid]; ok {
			out[uid] = l
		}
	}
	for uid, l := range freshList {
		out[uid] = l
	}
	return out, nil
}

func allUIDs(from uint32) imap.UIDSet {
	var s imap.UIDSet
	s.AddRange(imap.UID(from), 0) // from:*
	return s
}

// collectListing reads a metadata-only FETCH into out. UIDs below minUID
// are ignored (n:* answers the last message even when its UID is below n).
func (b *backupRun) collectListing(cmd *imapclient.FetchCommand, out map[uint32]listed, minUID uint32) error {
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var uid uint32
		l := listed{}
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				uid = uint32(it.UID)
			case imapclient.FetchItemDataFlags:
				l.flags, l.has = flagStrings(it.Flags), true
			case imapclient.FetchItemDataRFC822Size:
				l.size = it.Size
			case imapclient.FetchItemDataModSeq:
				l.modseq = it.ModSeq
			}
		}
		if uid == 0 || uid < minUID {
			continue
		}
		prev, ok := out[uid]
		if ok {
			if l.size == 0 {
				l.size = prev.size
			}
			if !l.has {
				l.flags, l.has, l.modseq = prev.flags, prev.has, prev.modseq
			}
		}
		out[uid] = l
	}
	return cmd.Close()
}

func flagStrings(flags []imap.Flag) []string {
	out := make([]string, 0, len(flags))
	for _, f := range flags {
		out = append(out, string(f))
	}
	return cleanFlags(out)
}

// fetchedMsg is one message of a body FETCH, filled in as its data items
// arrive; content and header come from a worker for buffered messages.
type fetchedMsg struct {
	uid          uint32
	flags        []string
	internalDate time.Time
	modseq       uint64
	gotBody      bool
	content      blobstore.Content
	header       headerFields
	err          error
	done         chan struct{}
}

type storeJob struct {
	m   *fetchedMsg
	buf *[]byte
}

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, bufferedMax); return &b }}

// fetchMessages fetches the bodies of uids in batches, the next batch's
// command sent before the current one is read.
func (b *backupRun) fetchMessages(f folderState, uidValidity uint32, uids []uint32, list map[uint32]listed) ([]blobstore.Item, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	var batches []imap.UIDSet
	var cur imap.UIDSet
	var n int
	var size int64
	for _, uid := range uids {
		if n > 0 && (n >= batchMessages || size+list[uid].size > batchBytes) {
			batches = append(batches, cur)
			cur, n, size = nil, 0, 0
		}
		cur.AddNum(imap.UID(uid))
		n++
		size += list[uid].size
	}
	batches = append(batches, cur)

	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	jobs := make(chan storeJob, 2)
	var wg sync.WaitGroup
	var storeErr error
	var errOnce sync.Once
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				b.store(ctx, j.m, byteReader(*j.buf))
				bodyPool.Put(j.buf)
				if j.m.err != nil {
					errOnce.Do(func() { storeErr = j.m.err; cancel() })
				}
				close(j.m.done)
			}
		}()
	}
	var msgs []*fetchedMsg
	var fetchErr error
	opts := &imap.FetchOptions{UID: true, Flags: true, InternalDate: true, ModSeq: b.condstore,
		BodySection: []*imap.FetchItemBodySection{{Peek: true}}}
	// One command at a time: Dovecot runs pipelined FETCH commands in
	// parallel and interleaves their answers, and go-imap's single reader
	// waits for each literal to be consumed, so a second command in
	// flight could block the first. A batch's round trip is negligible.
	for _, set := range batches {
		b.fetches++
		got, err := b.readBodies(ctx, b.s.c.Fetch(set, opts), jobs)
		msgs = append(msgs, got...)
		if err != nil {
			fetchErr = err
			break
		}
	}
	close(jobs)
	wg.Wait()
	if storeErr != nil {
		return nil, storeErr
	}
	if fetchErr != nil {
		var ie *imap.Error
		if !errors.As(fetchErr, &ie) {
			return nil, fetchErr
		}
		// The server answered NO: fetch the missing messages one by one,
		// so one unreadable message fails alone.
		got := map[uint32]bool{}
		for _, m := range msgs {
			got[m.uid] = true
		}
		for _, uid := range uids {
			if got[uid] {
				continue
			}
			one, err := b.fetchOne(ctx, uid, opts)
			if err != nil && !errors.As(err, &ie) {
				return nil, err
			}
			if err != nil {
				b.fail(f, uidValidity, uid, err)
				continue
			}
			msgs = append(msgs, one...)
		}
	}
	var out []blobstore.Item
	for _, m := range msgs {
		if m.err == nil && !m.gotBody {
			m.err = errors.New("the server returned no content for this message")
		}
		if m.err != nil {
			b.fail(f, uidValidity, m.uid, m.err)
			continue
		}
		out = append(out, messageItem(f, uidValidity, m))
	}
	return out, nil
}

func (b *backupRun) fetchOne(ctx context.Context, uid uint32, opts *imap.FetchOptions) ([]*fetchedMsg, error) {
	b.fetches++
	return b.readBodies(ctx, b.s.c.Fetch(imap.UIDSetNum(imap.UID(uid)), opts), nil)
}

func (b *backupRun) fail(f folderState, uidValidity, uid uint32, err error) {
	b.failed = append(b.failed, ItemFailure{ItemID: MessageItemID(f.mailbox, uidValidity, uid), Folder: f.path, UID: uid,
		Err: app.Fail("imap.message_unavailable", map[string]any{"folder": f.path, "uid": uid}, err)})
}

// readBodies reads one body FETCH. Small bodies go to the store workers
// through jobs (nil: store inline); large ones stream into the store here.
func (b *backupRun) readBodies(ctx context.Context, cmd *imapclient.FetchCommand, jobs chan<- storeJob) ([]*fetchedMsg, error) {
	var out []*fetchedMsg
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		m := &fetchedMsg{done: make(chan struct{})}
		async := false
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				m.uid = uint32(it.UID)
			case imapclient.FetchItemDataFlags:
				m.flags = flagStrings(it.Flags)
			case imapclient.FetchItemDataInternalDate:
				m.internalDate = it.Time
			case imapclient.FetchItemDataModSeq:
				m.modseq = it.ModSeq
			case imapclient.FetchItemDataBodySection:
				if it.Literal == nil || m.gotBody {
					continue
				}
				m.gotBody = true
				// go-imap passes a connection's EOF inside a literal on
				// as a plain EOF: a cut message must not pass as whole.
				lit := &exactReader{r: it.Literal, left: it.Literal.Size()}
				if jobs != nil && it.Literal.Size() <= bufferedMax {
					bp := bodyPool.Get().(*[]byte)
					buf := (*bp)[:0]
					buf, err := readAllInto(buf, lit)
					*bp = buf
					if err != nil {
						bodyPool.Put(bp)
						return out, b.abandon(err)
					}
					async = true
					select {
					case jobs <- storeJob{m: m, buf: bp}:
					case <-ctx.Done():
						bodyPool.Put(bp)
						return out, b.abandon(ctx.Err())
					}
				} else {
					b.store(ctx, m, lit)
					if m.err != nil {
						return out, b.abandon(m.err)
					}
				}
			}
		}
		if !async {
			close(m.done)
		}
		out = append(out, m)
	}
	err := cmd.Close()
	for _, m := range out {
		<-m.done
	}
	return out, err
}

// abandon ends a FETCH that failed in the middle of a literal by closing
// the connection. Draining the command instead (FetchCommand.Close) would
// read the broken literal again while go-imap's reader goroutine has moved
// on: a data race inside go-imap (found by -race in
// TestBackupConnectionDropped). The run ends with err anyway. The workers
// may still hold messages of this FETCH; they finish on their own.
func (b *backupRun) abandon(err error) error {
	b.s.conn.Close()
	return err
}

// store puts one message's bytes into the blob store, keeping its header.
// Its errors (the store's, or the connection's while streaming) stop the
// backup.
func (b *backupRun) store(ctx context.Context, m *fetchedMsg, r io.Reader) {
	var hc headerCapture
	c, err := b.w.PutItem(ctx, io.TeeReader(r, &hc))
	if err != nil {
		m.err = err
		return
	}
	m.content = c
	m.header = parseHeader(hc.buf)
	b.prog.AddDone(1, c.Size)
}

func readAllInto(buf []byte, r io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			// Full, as when buf was sized to the message: probe for the end
			// with one byte instead of growing (and copying) the buffer.
			var one [1]byte
			n, err := r.Read(one[:])
			if n == 0 && err == io.EOF {
				return buf, nil
			}
			buf = append(buf, one[:n]...)
			if err == io.EOF {
				return buf, nil
			} else if err != nil {
				return buf, err
			}
			continue
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// exactReader turns an early EOF into io.ErrUnexpectedEOF.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

type bytesReader struct {
	b []byte
}

func byteReader(b []byte) io.Reader { return &bytesReader{b: b} }

func (r *bytesReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func messageItem(f folderState, uidValidity uint32, m *fetchedMsg) blobstore.Item {
	meta := MessageMeta{Folder: f.mailbox, UIDValidity: uidValidity, UID: m.uid, Flags: m.flags,
		InternalDate: m.internalDate, ModSeq: m.modseq, Subject: m.header.Subject, From: m.header.From,
		Date: m.header.Date, MessageID: m.header.MessageID}
	raw, _ := json.Marshal(meta)
	name := m.header.Subject
	if name == "" {
		name = "(no subject)"
	}
	return blobstore.Item{ID: MessageItemID(f.mailbox, uidValidity, m.uid), Kind: KindMessage, Path: f.path,
		Name: name, Content: m.content, Meta: raw}
}
