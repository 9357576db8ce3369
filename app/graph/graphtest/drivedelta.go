package graphtest

import (
	"net/http"
	"sort"
)

// driveDelta is the server-side state behind an opaque drive delta token
// (driveitem-delta.md: nextLink and deltaLink carry a token).
type driveDelta struct {
	driveID string
	gen     int
	since   int64
	skip    bool
	entries []string
	offset  int
	upTo    int64
}

// driveOwner returns the user owning d, for its delta token generation.
func (s *Server) driveOwnerLocked(d *drive) *user { return s.users[d.ownerID] }

// driveDeltaPage is GET /drives/{id}/root/delta (driveitem-delta.md).
func (s *Server) driveDeltaPage(c *call, d *drive) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.driveOwnerLocked(d)
	base := "/drives/" + d.id + "/root/delta"
	var st driveDelta
	tok := c.query.Get("token")
	switch {
	case tok == "latest":
		// driveitem-delta.md: token=latest returns a deltaLink and no
		// items.
		dl := &driveDelta{driveID: d.id, gen: u.tokenGen, since: d.version}
		return jsonAnswer(http.StatusOK, map[string]any{"value": []any{},
			"@odata.deltaLink": s.absolute(c, base+"?token="+s.putOpaqueLocked(dl))})
	case tok != "":
		p, ok := s.opaque[tok].(*driveDelta)
		if !ok || p.driveID != d.id {
			return c.errInner(http.StatusBadRequest, "invalidRequest", "invalidToken", "The provided token is not valid.")
		}
		if p.gen != u.tokenGen {
			// driveitem-delta.md "Error responses": 410 Gone with a
			// Location to start over; errors.md: resyncRequired.
			a := c.errInner(http.StatusGone, "resyncRequired", "resyncChangesApplyDifferences",
				"Resync required. Replace any local items with the server's version (including deletes) if you're sure that the service was up to date with your local changes when you last sync'd. Upload any local changes that the server doesn't know about.")
			return withHeader(a, "Location", s.absolute(c, base))
		}
		if p.skip {
			st = *p
		} else {
			st = driveDelta{driveID: d.id, gen: u.tokenGen, skip: true, upTo: d.version, entries: driveChanges(d, p.since)}
		}
	default:
		st = driveDelta{driveID: d.id, gen: u.tokenGen, skip: true, upTo: d.version, entries: driveChanges(d, -1)}
	}
	n := deltaPageSize(c, 200, 999)
	end := min(st.offset+n, len(st.entries))
	vals := make([]map[string]any, 0, end-st.offset)
	for _, id := range st.entries[st.offset:end] {
		vals = append(vals, s.itemJSON(c, d, d.items[id], true))
	}
	body := map[string]any{"@odata.context": s.absolute(c, "/$metadata#Collection(driveItem)"), "value": vals}
	if end < len(st.entries) {
		next := st
		next.offset = end
		body["@odata.nextLink"] = s.absolute(c, base+"?token="+s.putOpaqueLocked(&next))
	} else {
		dl := &driveDelta{driveID: d.id, gen: st.gen, since: st.upTo}
		body["@odata.deltaLink"] = s.absolute(c, base+"?token="+s.putOpaqueLocked(dl))
	}
	return jsonAnswer(http.StatusOK, body)
}

// driveChanges lists items changed after since, parents before children
// (a first enumeration leaves deleted items out).
func driveChanges(d *drive, since int64) []string {
	type e struct {
		id    string
		depth int
		v     int64
	}
	var all []e
	for id, it := range d.items {
		if it.version <= since || (since < 0 && it.deleted) {
			continue
		}
		depth := 0
		for p := d.items[it.parentID]; p != nil; p = d.items[p.parentID] {
			depth++
		}
		all = append(all, e{id, depth, it.version})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].depth != all[j].depth {
			return all[i].depth < all[j].depth
		}
		return all[i].v < all[j].v
	})
	out := make([]string, len(all))
	for i := range all {
		out[i] = all[i].id
	}
	return out
}
