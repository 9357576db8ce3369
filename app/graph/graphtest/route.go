package graphtest

import (
	"net/http"
	"strings"
)

// Permissions (permissions-reference): reads accept the read or the
// read-write permission.
const (
	roleDirectory   = "User.Read.All|User.ReadWrite.All|Directory.Read.All|Directory.ReadWrite.All"
	roleSkus        = "Organization.Read.All|Organization.ReadWrite.All|Directory.Read.All|Directory.ReadWrite.All"
	roleSettings    = "MailboxSettings.Read|MailboxSettings.ReadWrite"
	roleMailRead    = "Mail.Read|Mail.ReadWrite"
	roleMailWrite   = "Mail.ReadWrite"
	roleFilesRead   = "Files.Read.All|Files.ReadWrite.All|Sites.Read.All|Sites.ReadWrite.All|Sites.FullControl.All"
	roleFilesWrite  = "Files.ReadWrite.All|Sites.ReadWrite.All|Sites.FullControl.All"
	deniedDirectory = "Insufficient privileges to complete the operation."
)

// Denials: directory calls answer Authorization_RequestDenied, Exchange
// ErrorAccessDenied, OneDrive accessDenied (resolve-auth-errors; errors.md).
func deniedDir(c *call) answer {
	return c.errAnswer(http.StatusForbidden, "Authorization_RequestDenied", deniedDirectory)
}

func deniedMail(c *call) answer {
	return c.errAnswer(http.StatusForbidden, "ErrorAccessDenied", "Access is denied. Check credentials and try again.")
}

func deniedDrive(c *call) answer {
	return c.errInner(http.StatusForbidden, "accessDenied", "accessDenied", "Access denied")
}

func notFoundSegment(c *call) answer {
	return c.errAnswer(http.StatusBadRequest, "BadRequest", "Resource not found for the segment '"+c.path+"'.")
}

func methodNotAllowed(c *call) answer {
	return c.errAnswer(http.StatusMethodNotAllowed, "Request_BadRequest", "Specified HTTP method is not allowed for the request target.")
}

// route maps a call to its handler, the permission it needs and the
// throttling budget it spends; this is the table of contents of the fake.
func (s *Server) route(c *call) routed {
	segs := strings.Split(strings.Trim(c.path, "/"), "/")
	rt := routed{notFound: notFoundSegment}
	get, post := c.method == http.MethodGet, c.method == http.MethodPost
	switch {
	case len(segs) == 1 && segs[0] == "$batch" && post:
		rt.h = s.batch
		return rt
	case len(segs) == 1 && segs[0] == "users" && get:
		rt.h, rt.role, rt.denied = s.listUsers, roleDirectory, deniedDir
		return rt
	case len(segs) == 1 && segs[0] == "subscribedSkus" && get:
		rt.h, rt.role, rt.denied = s.listSkus, roleSkus, deniedDir
		return rt
	case len(segs) >= 2 && segs[0] == "drives":
		return s.routeDrive(c, segs[1], segs[2:])
	case len(segs) >= 2 && segs[0] == "users":
	default:
		return rt
	}
	uid := segs[1]
	rest := segs[2:]
	s.mu.Lock()
	u := s.userLocked(uid)
	s.mu.Unlock()
	if u == nil {
		rt.h = func(c *call) answer {
			return c.errAnswer(http.StatusNotFound, "Request_ResourceNotFound", "Resource '"+uid+"' does not exist or one of its queried reference-property objects are not present.")
		}
		rt.role, rt.denied = roleDirectory, deniedDir
		if len(rest) > 0 && rest[0] != "drive" {
			rt.h = func(c *call) answer {
				return c.errAnswer(http.StatusNotFound, "ErrorInvalidUser", "The requested user '"+uid+"' is invalid.")
			}
			rt.role, rt.denied = roleMailRead, deniedMail
		}
		return rt
	}
	if len(rest) == 0 {
		if get {
			rt.h = func(c *call) answer { return s.getUser(c, uid) }
			rt.role, rt.denied = roleDirectory, deniedDir
		}
		return rt
	}
	if rest[0] == "drive" {
		s.mu.Lock()
		d := u.drive
		s.mu.Unlock()
		if d == nil || len(rest) == 1 {
			if get && len(rest) == 1 || d == nil {
				rt.h = func(c *call) answer { return s.userDrive(c, u) }
				rt.role, rt.denied, rt.scope, rt.cost = roleFilesRead, deniedDrive, scopeSharePoint, 1
			}
			return rt
		}
		return s.routeDrive(c, d.id, rest[1:])
	}
	// Everything else is the mailbox: Outlook's per-mailbox limits.
	rt.scope, rt.userID = scopeMailbox, u.ID
	rt.denied = deniedMail
	rt.role = roleMailRead
	if !get {
		rt.role = roleMailWrite
	}
	var h func(c *call) answer
	switch {
	case len(rest) == 1 && rest[0] == "mailboxSettings" && get:
		rt.role = roleSettings
		h = func(c *call) answer { return s.mailboxSettings(c, u) }
	case rest[0] == "mailFolders":
		h = s.routeFolders(c, u, rest[1:])
	case rest[0] == "messages":
		h = s.routeMessages(c, u, rest[1:])
	}
	if h == nil {
		return rt
	}
	rt.h = func(c *call) answer {
		if u.NoMailbox {
			return c.noMailbox()
		}
		return h(c)
	}
	return rt
}

func (s *Server) routeFolders(c *call, u *user, p []string) func(c *call) answer {
	get, post := c.method == http.MethodGet, c.method == http.MethodPost
	switch {
	case len(p) == 0 && get:
		return func(c *call) answer { return s.listFolders(c, u, "msgfolderroot") }
	case len(p) == 0 && post:
		return func(c *call) answer { return s.createFolder(c, u, "msgfolderroot") }
	case len(p) == 1 && get:
		return func(c *call) answer { return s.getFolder(c, u, p[0]) }
	case len(p) == 2 && p[1] == "childFolders" && get:
		return func(c *call) answer { return s.listFolders(c, u, p[0]) }
	case len(p) == 2 && p[1] == "childFolders" && post:
		return func(c *call) answer { return s.createFolder(c, u, p[0]) }
	case len(p) == 2 && p[1] == "messages" && get:
		return func(c *call) answer { return s.listMessages(c, u, p[0]) }
	case len(p) == 2 && p[1] == "messages" && post:
		return func(c *call) answer { return s.createMessage(c, u, p[0]) }
	case len(p) == 3 && p[1] == "messages" && p[2] == "delta" && get:
		return func(c *call) answer { return s.messageDelta(c, u, p[0]) }
	}
	return nil
}

func (s *Server) routeMessages(c *call, u *user, p []string) func(c *call) answer {
	get, post := c.method == http.MethodGet, c.method == http.MethodPost
	switch {
	case len(p) == 0 && post:
		return func(c *call) answer { return s.createMessage(c, u, "") }
	case len(p) == 1 && get:
		return func(c *call) answer { return s.getMessage(c, u, p[0]) }
	case len(p) == 1 && c.method == http.MethodDelete:
		return func(c *call) answer { return s.deleteMessage(c, u, p[0]) }
	case len(p) == 2 && p[1] == "$value" && get:
		return func(c *call) answer { return s.messageValue(c, u, p[0]) }
	case len(p) == 2 && p[1] == "attachments" && post:
		return func(c *call) answer { return s.addAttachment(c, u, p[0]) }
	case len(p) == 2 && p[1] == "attachments" && get:
		return func(c *call) answer { return s.listAttachments(c, u, p[0]) }
	case len(p) == 3 && p[1] == "attachments" && p[2] == "createUploadSession" && post:
		return func(c *call) answer { return s.createAttachmentSession(c, u, p[0]) }
	}
	return nil
}

// routeDrive routes /drives/{id}/… (and /users/{id}/drive/…). Paths may
// address items by path: root:/a/b.txt, root:/a/b.txt:/content,
// items/{id}:/name:/createUploadSession (driveitem-get.md "path").
func (s *Server) routeDrive(c *call, driveID string, p []string) routed {
	rt := routed{notFound: notFoundSegment, scope: scopeSharePoint, cost: 1, denied: deniedDrive, role: roleFilesRead}
	if c.method != http.MethodGet {
		rt.role, rt.cost = roleFilesWrite, 2
	}
	get, post, put := c.method == http.MethodGet, c.method == http.MethodPost, c.method == http.MethodPut
	s.mu.Lock()
	d := s.drives[driveID]
	s.mu.Unlock()
	if d == nil {
		rt.h = func(c *call) answer {
			return c.errInner(http.StatusNotFound, "itemNotFound", "itemNotFound", "The resource could not be found.")
		}
		return rt
	}
	joined := strings.Join(p, "/")
	// Path-addressed forms.
	if base, rel, ok := strings.Cut(joined, ":/"); ok {
		relPath, suffix, _ := strings.Cut(rel, ":")
		suffix = strings.Trim(suffix, "/")
		parent := func() *driveItem {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.baseItemLocked(d, base)
		}
		target := func() *driveItem {
			s.mu.Lock()
			defer s.mu.Unlock()
			if b := s.baseItemLocked(d, base); b != nil {
				return d.byPath(b, relPath)
			}
			return nil
		}
		switch {
		case suffix == "" && get:
			rt.h = func(c *call) answer { return s.getItem(c, d, target()) }
		case suffix == "content" && get:
			rt.h = func(c *call) answer { return s.itemContent(c, d, target()) }
		case suffix == "content" && put:
			rt.h = func(c *call) answer { return s.putContent(c, d, parent(), relPath) }
		case suffix == "createUploadSession" && post:
			rt.h = func(c *call) answer { return s.createDriveSession(c, d, parent(), relPath) }
		case suffix == "children" && get:
			rt.cost = 2
			rt.h = func(c *call) answer { return s.listChildren(c, d, target()) }
		}
		return rt
	}
	item := func(ref string) func() *driveItem {
		return func() *driveItem {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.baseItemLocked(d, ref)
		}
	}
	switch {
	case len(p) == 0 && get:
		s.mu.Lock()
		u := s.driveOwnerLocked(d)
		s.mu.Unlock()
		rt.h = func(c *call) answer { return jsonAnswer(http.StatusOK, driveJSON(u, d)) }
	case len(p) == 2 && p[0] == "root" && p[1] == "delta" && get:
		// A delta without a token costs 2 resource units, with one 1.
		if c.query.Get("token") == "" {
			rt.cost = 2
		}
		rt.h = func(c *call) answer { return s.driveDeltaPage(c, d) }
	case len(p) == 1 && p[0] == "root" && get:
		rt.h = func(c *call) answer { return s.getItem(c, d, item("root")()) }
	case len(p) == 2 && p[0] == "items" && get:
		rt.h = func(c *call) answer { return s.getItem(c, d, item("items/"+p[1])()) }
	case len(p) == 3 && p[2] == "content" && get:
		rt.h = func(c *call) answer { return s.itemContent(c, d, item(p[0]+"/"+p[1])()) }
	case len(p) >= 2 && p[len(p)-1] == "children":
		ref := strings.Join(p[:len(p)-1], "/")
		if get {
			rt.cost = 2
			rt.h = func(c *call) answer { return s.listChildren(c, d, item(ref)()) }
		} else if post {
			rt.h = func(c *call) answer { return s.createChild(c, d, item(ref)()) }
		}
	}
	return rt
}

// baseItemLocked resolves "root", "items/root" or "items/{id}".
func (s *Server) baseItemLocked(d *drive, ref string) *driveItem {
	switch {
	case ref == "root" || ref == "items/root":
		return d.items[d.rootID]
	case strings.HasPrefix(ref, "items/"):
		it := d.items[strings.TrimPrefix(ref, "items/")]
		if it == nil || it.deleted {
			return nil
		}
		return it
	}
	return nil
}
