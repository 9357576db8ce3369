package graphtest

import (
	"net/http"
	"strconv"
	"strings"
)

type sku struct {
	id, partNumber string
}

// Sku adds a licence SKU and returns its skuId.
func (s *Server) Sku(partNumber string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &sku{id: newID(), partNumber: partNumber}
	s.skus = append(s.skus, k)
	return k.id
}

// User is a directory user to add.
type User struct {
	ID                string // generated when empty
	DisplayName       string
	UserPrincipalName string
	Mail              string
	Disabled          bool
	Licenses          []string // skuIds
	// Purpose is mailboxSettings.userPurpose: user (default), shared, room, equipment.
	Purpose string
	// NoMailbox: mailbox calls answer 404 MailboxNotEnabledForRESTAPI.
	NoMailbox bool
	// NoDrive: /drive answers 404 (no OneDrive provisioned).
	NoDrive bool
}

type user struct {
	User
	mb        *mailbox
	drive     *drive
	overQuota bool
	replay    bool
	tokenGen  int // bumped by InvalidateDeltaTokens
}

// AddUser adds a user with a mailbox (Inbox, Sent Items, Deleted Items,
// Drafts and a search folder) and a drive, and returns its id.
func (s *Server) AddUser(u User) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.ID == "" {
		u.ID = newID()
	}
	if u.Purpose == "" {
		u.Purpose = "user"
	}
	if u.DisplayName == "" {
		u.DisplayName = u.UserPrincipalName
	}
	us := &user{User: u}
	us.mb = newMailbox()
	if !u.NoDrive {
		us.drive = newDrive(u.ID)
		s.drives[us.drive.id] = us.drive
	}
	if old := s.users[u.ID]; old != nil {
		s.removeUserLocked(u.ID)
	}
	s.users[u.ID] = us
	s.userList = append(s.userList, us)
	return u.ID
}

// RemoveUser deletes a user from the directory.
func (s *Server) RemoveUser(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeUserLocked(id)
}

func (s *Server) removeUserLocked(id string) {
	us := s.users[id]
	if us == nil {
		return
	}
	delete(s.users, id)
	if us.drive != nil {
		delete(s.drives, us.drive.id)
	}
	for i, x := range s.userList {
		if x == us {
			s.userList = append(s.userList[:i:i], s.userList[i+1:]...)
			break
		}
	}
}

func (s *Server) userLocked(id string) *user {
	if u := s.users[id]; u != nil {
		return u
	}
	// Graph takes the userPrincipalName in place of the id
	// (api/user-get.md "GET /users/{id | userPrincipalName}").
	for _, u := range s.userList {
		if strings.EqualFold(u.UserPrincipalName, id) {
			return u
		}
	}
	return nil
}

var userFields = []string{"businessPhones", "displayName", "givenName", "jobTitle", "mail", "mobilePhone",
	"officeLocation", "preferredLanguage", "surname", "userPrincipalName", "id"}

func (s *Server) userJSON(u *user) map[string]any {
	lic := make([]map[string]any, 0, len(u.Licenses))
	for _, id := range u.Licenses {
		lic = append(lic, map[string]any{"skuId": id, "disabledPlans": []string{}})
	}
	var mail any
	if u.Mail != "" {
		mail = u.Mail
	}
	return map[string]any{
		"id": u.ID, "displayName": u.DisplayName, "userPrincipalName": u.UserPrincipalName,
		"mail": mail, "accountEnabled": !u.Disabled, "assignedLicenses": lic, "userType": "Member",
		"businessPhones": []string{}, "givenName": nil, "jobTitle": nil, "mobilePhone": nil,
		"officeLocation": nil, "preferredLanguage": nil, "surname": nil,
	}
}

// project applies $select; id is always returned (query-parameters.md
// "select"). Without $select the default properties are returned.
func project(full map[string]any, sel []string, defaults []string) map[string]any {
	if len(sel) == 0 {
		sel = defaults
		if sel == nil {
			return full
		}
	}
	out := make(map[string]any, len(sel)+1)
	for _, k := range sel {
		for fk, v := range full {
			if strings.EqualFold(fk, k) {
				out[fk] = v
			}
		}
	}
	if id, ok := full["id"]; ok {
		out["id"] = id
	}
	return out
}

func selectOf(c *call) []string {
	v := c.query.Get("$select")
	if v == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

type usersPage struct {
	offset int
	sel    []string
	top    int
}

// listUsers is GET /users (api/user-list.md, paging.md): 100 per page by
// default, $top 1–999, $skiptoken in @odata.nextLink; $skip is refused.
func (s *Server) listUsers(c *call) answer {
	if c.query.Has("$skip") {
		return c.errAnswer(http.StatusBadRequest, "Request_BadRequest", "'$skip' is not supported by the service.")
	}
	st := usersPage{top: 100, sel: selectOf(c)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok := c.query.Get("$skiptoken"); tok != "" {
		p, ok := s.opaque[tok].(usersPage)
		if !ok {
			return c.errAnswer(http.StatusBadRequest, "Directory_ExpiredPageToken", "The specified page token value has expired and can no longer be included in your request.")
		}
		st = p
	} else if t := c.query.Get("$top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > 999 {
			return c.errAnswer(http.StatusBadRequest, "Request_UnsupportedQuery", "Invalid page size specified: '"+t+"'. Must be between 1 and 999 inclusive.")
		}
		st.top = n
	}
	end := min(st.offset+st.top, len(s.userList))
	start := min(st.offset, end)
	vals := make([]map[string]any, 0, end-start)
	for _, u := range s.userList[start:end] {
		vals = append(vals, project(s.userJSON(u), st.sel, userFields))
	}
	body := map[string]any{"@odata.context": s.absolute(c, "/$metadata#users"), "value": vals}
	if end < len(s.userList) {
		next := st
		next.offset = end
		body["@odata.nextLink"] = s.absolute(c, "/users?$skiptoken="+s.putOpaqueLocked(next))
	}
	return jsonAnswer(http.StatusOK, body)
}

func (s *Server) getUser(c *call, id string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.userLocked(id)
	if u == nil {
		return c.errAnswer(http.StatusNotFound, "Request_ResourceNotFound", "Resource '"+id+"' does not exist or one of its queried reference-property objects are not present.")
	}
	return jsonAnswer(http.StatusOK, project(s.userJSON(u), selectOf(c), userFields))
}

// listSkus is GET /subscribedSkus (api/subscribedsku-list.md).
func (s *Server) listSkus(c *call) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	consumed := map[string]int{}
	for _, u := range s.userList {
		for _, id := range u.Licenses {
			consumed[id]++
		}
	}
	vals := []map[string]any{}
	for _, k := range s.skus {
		vals = append(vals, project(map[string]any{
			"id": newID() + "_" + k.id, "skuId": k.id, "skuPartNumber": k.partNumber,
			"capabilityStatus": "Enabled", "appliesTo": "User", "consumedUnits": consumed[k.id],
			"prepaidUnits": map[string]int{"enabled": 25, "suspended": 0, "warning": 0, "lockedOut": 0},
			"servicePlans": []any{},
		}, selectOf(c), nil))
	}
	return jsonAnswer(http.StatusOK, map[string]any{"@odata.context": s.absolute(c, "/$metadata#subscribedSkus"), "value": vals})
}

// mailboxSettings is GET /users/{id}/mailboxSettings
// (resources/mailboxsettings.md: userPurpose).
func (s *Server) mailboxSettings(c *call, u *user) answer {
	return jsonAnswer(http.StatusOK, project(map[string]any{
		"@odata.context":                        s.absolute(c, "/$metadata#users('"+u.ID+"')/mailboxSettings"),
		"timeZone":                              "UTC",
		"language":                              map[string]any{"locale": "en-US", "displayName": "English (United States)"},
		"dateFormat":                            "M/d/yyyy",
		"timeFormat":                            "h:mm tt",
		"userPurpose":                           u.Purpose,
		"delegateMeetingMessageDeliveryOptions": "sendToDelegateOnly",
	}, selectOf(c), nil))
}
