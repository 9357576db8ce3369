package graphtest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"mime"
	"net/mail"
	"sort"
	"strings"
	"time"
)

// mailbox is one user's Exchange mailbox. Every change bumps version and
// stamps the changed message, which is what message delta reads.
type mailbox struct {
	rootID    string
	folders   map[string]*folder
	wellKnown map[string]string // well-known name -> folder id
	messages  map[string]*message
	version   int64
}

type folder struct {
	id, name, parentID string
	hidden, search     bool
	children           []string
	msgs               map[string]*message
	// left holds messages that left the folder (deleted or moved out),
	// with the mailbox version at which they left: delta's @removed.
	left map[string]int64
}

type attachment struct {
	id, name, contentType string
	inline                bool
	content               []byte
}

type message struct {
	id, folderID                string
	internetMessageID, subject  string
	from                        *address
	to, cc                      []address
	received, sent, created     time.Time
	modified                    time.Time
	isRead, isDraft             bool
	changeKey                   string
	categories                  []string
	flagStatus                  string
	bodyType, body, bodyPreview string
	mime                        []byte
	attachments                 []*attachment
	extraHeaders                [][2]string
	version                     int64
}

type address struct{ name, addr string }

// exchangeID makes an id shaped like Exchange's (base64url, case
// sensitive; outlook-immutable-id.md).
func exchangeID() string {
	var b [33]byte
	_, _ = rand.Read(b[:])
	return "AAMkAG" + base64.RawURLEncoding.EncodeToString(b[:])
}

func newMailbox() *mailbox {
	mb := &mailbox{folders: map[string]*folder{}, wellKnown: map[string]string{}, messages: map[string]*message{}}
	root := mb.addFolder("", "Top of Information Store", false)
	mb.rootID = root.id
	mb.wellKnown["msgfolderroot"] = root.id
	for _, f := range []struct{ wk, name string }{
		{"inbox", "Inbox"}, {"drafts", "Drafts"}, {"sentitems", "Sent Items"}, {"deleteditems", "Deleted Items"},
	} {
		mb.wellKnown[f.wk] = mb.addFolder(root.id, f.name, false).id
	}
	// user-list-mailfolders.md: search folders come back with
	// "@odata.type":"#microsoft.graph.mailSearchFolder".
	sf := mb.addFolder(root.id, "Unread Mail", false)
	sf.search = true
	return mb
}

func (mb *mailbox) addFolder(parentID, name string, hidden bool) *folder {
	f := &folder{id: exchangeID(), name: name, parentID: parentID, hidden: hidden,
		msgs: map[string]*message{}, left: map[string]int64{}}
	mb.folders[f.id] = f
	if p := mb.folders[parentID]; p != nil {
		p.children = append(p.children, f.id)
	}
	return f
}

// folder resolves an id or a well-known name (resources/mailfolder.md
// "Well-known folder names", case-insensitive).
func (mb *mailbox) folder(idOrName string) *folder {
	if f := mb.folders[idOrName]; f != nil {
		return f
	}
	if id, ok := mb.wellKnown[strings.ToLower(idOrName)]; ok {
		return mb.folders[id]
	}
	return nil
}

func (mb *mailbox) path(f *folder) string {
	var parts []string
	for f != nil && f.id != mb.rootID {
		parts = append(parts, f.name)
		f = mb.folders[f.parentID]
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}

func (mb *mailbox) touch(m *message) {
	mb.version++
	m.version = mb.version
	m.modified = time.Now().UTC()
	m.changeKey = "CQAAABYAAAB" + base64.RawURLEncoding.EncodeToString([]byte(time.Now().Format("150405.000000000")))
}

func (mb *mailbox) put(m *message, f *folder) {
	m.folderID = f.id
	f.msgs[m.id] = m
	delete(f.left, m.id)
	mb.messages[m.id] = m
	mb.touch(m)
}

func (mb *mailbox) remove(m *message) {
	f := mb.folders[m.folderID]
	mb.version++
	delete(f.msgs, m.id)
	f.left[m.id] = mb.version
	delete(mb.messages, m.id)
}

func (mb *mailbox) move(m *message, to *folder) {
	from := mb.folders[m.folderID]
	mb.version++
	delete(from.msgs, m.id)
	from.left[m.id] = mb.version
	m.folderID = to.id
	to.msgs[m.id] = m
	delete(to.left, m.id)
	mb.touch(m)
}

// WellKnownFolder returns the id of a user's well-known folder ("inbox",
// "sentitems", "deleteditems", "drafts", "msgfolderroot").
func (s *Server) WellKnownFolder(userID, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mustUser(userID)
	f := u.mb.folder(name)
	if f == nil {
		panic("graphtest: no well-known folder " + name)
	}
	return f.id
}

func (s *Server) mustUser(id string) *user {
	u := s.userLocked(id)
	if u == nil {
		panic("graphtest: no user " + id)
	}
	return u
}

// AddFolder adds a mail folder under parentID and returns its id.
func (s *Server) AddFolder(userID, parentID, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mustUser(userID)
	p := u.mb.folder(parentID)
	if p == nil {
		panic("graphtest: no folder " + parentID)
	}
	return u.mb.addFolder(p.id, name, false).id
}

// AddMessage delivers raw MIME into a folder as a received, non-draft
// message and returns its id.
func (s *Server) AddMessage(userID, folderID string, mime []byte, received time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mustUser(userID)
	f := u.mb.folder(folderID)
	if f == nil {
		panic("graphtest: no folder " + folderID)
	}
	m := messageFromMIME(mime)
	m.received = received.UTC().Truncate(time.Second)
	if m.sent.IsZero() {
		m.sent = m.received
	}
	u.mb.put(m, f)
	return m.id
}

// messageFromMIME reads what Exchange shows of a MIME message.
func messageFromMIME(raw []byte) *message {
	now := time.Now().UTC()
	m := &message{id: exchangeID(), mime: append([]byte(nil), raw...), created: now, flagStatus: "notFlagged", bodyType: "text"}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return m
	}
	m.subject = decodeHeader(msg.Header.Get("Subject"))
	m.internetMessageID = strings.TrimSpace(msg.Header.Get("Message-Id"))
	if a, err := mail.ParseAddress(msg.Header.Get("From")); err == nil {
		m.from = &address{name: a.Name, addr: a.Address}
	}
	for _, h := range []struct {
		name string
		dst  *[]address
	}{{"To", &m.to}, {"Cc", &m.cc}} {
		if l, err := msg.Header.AddressList(h.name); err == nil {
			for _, a := range l {
				*h.dst = append(*h.dst, address{name: a.Name, addr: a.Address})
			}
		}
	}
	if d, err := msg.Header.Date(); err == nil {
		m.sent = d.UTC()
	}
	return m
}

// DeleteMessage removes a message (delta reports @removed).
func (s *Server) DeleteMessage(userID, messageID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mustUser(userID)
	if m := u.mb.messages[messageID]; m != nil {
		u.mb.remove(m)
	}
}

// MoveMessage moves a message to another folder (remove in one folder's
// delta, add in the other's). The id is kept: the fake behaves as Graph
// does for clients sending Prefer: IdType="ImmutableId"
// (outlook-immutable-id.md).
func (s *Server) MoveMessage(userID, messageID, folderID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mustUser(userID)
	m := u.mb.messages[messageID]
	f := u.mb.folder(folderID)
	if m == nil || f == nil {
		panic("graphtest: no message or folder")
	}
	u.mb.move(m, f)
}

// StoredMessage is a message as the fake holds it, for assertions.
type StoredMessage struct {
	ID                string
	FolderID          string
	FolderPath        string // display names from the root, '/'-separated
	IsDraft           bool
	IsRead            bool
	Subject           string
	InternetMessageID string
	SentDateTime      time.Time
	ReceivedDateTime  time.Time
	MIME              []byte   // as delivered, or as Graph renders a created message
	Attachments       []string // names
	AttachmentSizes   []int64
}

// Messages returns the user's messages in every folder, oldest received
// first.
func (s *Server) Messages(userID string) []StoredMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.mustUser(userID)
	out := make([]StoredMessage, 0, len(u.mb.messages))
	for _, m := range u.mb.messages {
		sm := StoredMessage{ID: m.id, FolderID: m.folderID, FolderPath: u.mb.path(u.mb.folders[m.folderID]),
			IsDraft: m.isDraft, IsRead: m.isRead, Subject: m.subject, InternetMessageID: m.internetMessageID,
			SentDateTime: m.sent, ReceivedDateTime: m.received, MIME: append([]byte(nil), m.mime...)}
		for _, a := range m.attachments {
			sm.Attachments = append(sm.Attachments, a.name)
			sm.AttachmentSizes = append(sm.AttachmentSizes, int64(len(a.content)))
		}
		out = append(out, sm)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ReceivedDateTime.Equal(out[j].ReceivedDateTime) {
			return out[i].ReceivedDateTime.Before(out[j].ReceivedDateTime)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// InvalidateDeltaTokens makes the user's current delta tokens (mail and
// drive) answer as expired (syncStateNotFound for mail, 410 for drives).
func (s *Server) InvalidateDeltaTokens(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustUser(userID).tokenGen++
}

// SetOverQuota makes message delta of the user answer ErrorQuotaExceeded
// (listing still works), as Exchange does for a full mailbox.
func (s *Server) SetOverQuota(userID string, over bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustUser(userID).overQuota = over
}

// ReplayDelta makes the next delta pages of the user repeat entries
// already sent (Graph's documented replays).
func (s *Server) ReplayDelta(userID string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustUser(userID).replay = on
}

func decodeHeader(v string) string {
	d, err := new(mime.WordDecoder).DecodeHeader(v)
	if err != nil {
		return v
	}
	return d
}
