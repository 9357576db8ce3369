package graphtest

import (
	"net/http"
	"regexp"
	"sort"
	"strconv"
)

// mailDelta is the server-side state behind an opaque $skiptoken or
// $deltatoken of message delta (delta-query-messages.md: tokens are opaque
// and carry the $select of the first call).
type mailDelta struct {
	userID, folderID string
	gen              int
	sel              []string
	// A $deltatoken: the changes after mailbox version since.
	since int64
	// A $skiptoken: the rest of a round.
	entries []deltaEntry
	offset  int
	upTo    int64 // the since of the round's deltaLink
	skip    bool
}

type deltaEntry struct {
	id      string
	removed bool
}

var maxPageSize = regexp.MustCompile(`(?i)odata\.maxpagesize\s*=\s*(\d+)`)

// deltaPageSize reads Prefer: odata.maxpagesize (delta-query-messages.md:
// default 10 messages a page for message delta).
func deltaPageSize(c *call, def, max int) int {
	if m := maxPageSize.FindStringSubmatch(c.header.Get("Prefer")); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
			return min(n, max)
		}
	}
	if t, err := strconv.Atoi(c.query.Get("$top")); err == nil && t > 0 {
		return min(t, max)
	}
	return def
}

func (c *call) syncStateNotFound() answer {
	// delta-query-overview.md "Synchronization reset" / errors.md:
	// syncStateNotFound means start a full synchronization again.
	return c.errAnswer(http.StatusBadRequest, "syncStateNotFound", "The sync state is not found or has expired. Please start a new synchronization.")
}

// messageDelta is GET /users/{id}/mailFolders/{id}/messages/delta
// (message-delta.md, delta-query-messages.md).
func (s *Server) messageDelta(c *call, u *user, folderID string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := u.mb.folder(folderID)
	if f == nil {
		return c.folderNotFound()
	}
	if u.overQuota {
		// microsoft-graph-docs #2927 / contrib #6596: a full mailbox
		// refuses delta with 403 ErrorQuotaExceeded while plain listing
		// still works.
		return c.errAnswer(http.StatusForbidden, "ErrorQuotaExceeded", "Mailbox has exceeded maximum mailbox size.")
	}
	var st mailDelta
	switch {
	case c.query.Get("$skiptoken") != "":
		p, ok := s.opaque[c.query.Get("$skiptoken")].(*mailDelta)
		if !ok || !p.skip || p.userID != u.ID || p.folderID != f.id || p.gen != u.tokenGen {
			return c.syncStateNotFound()
		}
		st = *p
	case c.query.Get("$deltatoken") != "":
		p, ok := s.opaque[c.query.Get("$deltatoken")].(*mailDelta)
		if !ok || p.skip || p.userID != u.ID || p.folderID != f.id || p.gen != u.tokenGen {
			return c.syncStateNotFound()
		}
		st = mailDelta{userID: u.ID, folderID: f.id, gen: u.tokenGen, sel: p.sel, skip: true,
			upTo: u.mb.version, entries: changesSince(f, p.since)}
		if u.replay {
			// delta-query-overview.md "Replays": entries already sent
			// may come again.
			st.entries = append(alreadySent(f, p.since), st.entries...)
		}
	default:
		st = mailDelta{userID: u.ID, folderID: f.id, gen: u.tokenGen, sel: selectOf(c), skip: true,
			upTo: u.mb.version, entries: changesSince(f, -1)}
	}
	n := deltaPageSize(c, 10, 1000)
	end := min(st.offset+n, len(st.entries))
	page := st.entries[st.offset:end]
	if u.replay && st.offset > 0 {
		page = append(append([]deltaEntry(nil), st.entries[max(0, st.offset-2):st.offset]...), page...)
	}
	vals := make([]map[string]any, 0, len(page))
	for _, e := range page {
		m := f.msgs[e.id]
		if e.removed || m == nil {
			// delta-query-overview.md "Resource representation": a
			// removed item is its id and @removed.
			vals = append(vals, map[string]any{"@odata.type": "#microsoft.graph.message", "id": e.id,
				"@removed": map[string]any{"reason": "deleted"}})
			continue
		}
		j := projectMessage(m, st.sel)
		j["@odata.type"] = "#microsoft.graph.message"
		vals = append(vals, j)
	}
	base := "/users/" + u.ID + "/mailFolders/" + f.id + "/messages/delta"
	body := map[string]any{"@odata.context": s.absolute(c, "/$metadata#Collection(message)"), "value": vals}
	if end < len(st.entries) {
		next := st
		next.offset = end
		body["@odata.nextLink"] = s.absolute(c, base+"?$skiptoken="+s.putOpaqueLocked(&next))
	} else {
		dl := &mailDelta{userID: u.ID, folderID: f.id, gen: st.gen, sel: st.sel, since: st.upTo}
		body["@odata.deltaLink"] = s.absolute(c, base+"?$deltatoken="+s.putOpaqueLocked(dl))
	}
	h := jsonAnswer(http.StatusOK, body)
	return h
}

// changesSince lists what changed in f after version since: messages
// added or changed, and messages that left it (deleted or moved out).
func changesSince(f *folder, since int64) []deltaEntry {
	type ver struct {
		deltaEntry
		v int64
	}
	var all []ver
	for id, m := range f.msgs {
		if m.version > since {
			all = append(all, ver{deltaEntry{id: id}, m.version})
		}
	}
	if since >= 0 {
		for id, v := range f.left {
			if v > since {
				all = append(all, ver{deltaEntry{id: id, removed: true}, v})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	out := make([]deltaEntry, len(all))
	for i := range all {
		out[i] = all[i].deltaEntry
	}
	return out
}

// alreadySent picks up to two unchanged messages to replay.
func alreadySent(f *folder, since int64) []deltaEntry {
	var out []deltaEntry
	for id, m := range f.msgs {
		if m.version <= since {
			out = append(out, deltaEntry{id: id})
			if len(out) == 2 {
				break
			}
		}
	}
	return out
}
