package restapi

import (
	"io"
	"strconv"

	"backstop/app"
)

// endpointsOutputBody is the answer of GET /api/v1/endpoints. Its schema
// name (EndpointsOutputBody) is the one huma gave the anonymous body it
// replaces; it writes itself (fastjson.go) because it is the API's largest
// answer.
type endpointsOutputBody struct {
	Items []app.EndpointView `json:"items"`
	Total int                `json:"total"`
}

// AppendJSON appends the json.Marshal encoding of the body.
func (l endpointsOutputBody) AppendJSON(b []byte) []byte {
	b = append(b, `{"items":`...)
	if l.Items == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range l.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendEndpointView(b, &l.Items[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(l.Total), 10)
	return append(b, '}')
}

// WriteJSON writes the body as AppendJSON does, followed by a newline, in
// pieces of about streamChunk bytes.
func (l endpointsOutputBody) WriteJSON(w io.Writer) error {
	if l.Items == nil {
		_, err := w.Write(append(l.AppendJSON(nil), '\n'))
		return err
	}
	buf := make([]byte, 0, streamChunk+4096)
	buf = append(buf, `{"items":[`...)
	for i := range l.Items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendEndpointView(buf, &l.Items[i])
		if len(buf) >= streamChunk {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, `],"total":`...)
	buf = strconv.AppendInt(buf, int64(l.Total), 10)
	buf = append(buf, '}', '\n')
	_, err := w.Write(buf)
	return err
}

// appendEndpointView appends the json.Marshal encoding of v: its fields in
// declaration order under their json names.
func appendEndpointView(b []byte, v *app.EndpointView) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, v.ID)
	b = append(b, `,"tenantId":`...)
	b = appendJSONString(b, v.TenantID)
	b = append(b, `,"hostname":`...)
	b = appendJSONString(b, v.Hostname)
	b = append(b, `,"displayName":`...)
	b = appendJSONString(b, v.DisplayName)
	b = append(b, `,"profile":`...)
	b = appendJSONString(b, v.Profile)
	b = append(b, `,"os":`...)
	b = appendJSONString(b, v.OS)
	b = append(b, `,"arch":`...)
	b = appendJSONString(b, v.Arch)
	b = append(b, `,"agentVersion":`...)
	b = appendJSONString(b, v.AgentVersion)
	b = append(b, `,"pinnedAgentVersion":`...)
	if v.PinnedAgentVersion == nil {
		b = append(b, `null`...)
	} else {
		b = appendJSONString(b, *v.PinnedAgentVersion)
	}
	b = append(b, `,"status":`...)
	b = appendJSONString(b, v.Status)
	b = append(b, `,"connection":`...)
	b = appendJSONString(b, v.Connection)
	b = append(b, `,"lastSeenAt":`...)
	b = appendTimePtr(b, v.LastSeenAt)
	b = append(b, `,"lastBackupAt":`...)
	b = appendTimePtr(b, v.LastBackupAt)
	b = append(b, `,"lastSuccessAt":`...)
	b = appendTimePtr(b, v.LastSuccessAt)
	b = append(b, `,"readiness":{"state":`...)
	b = appendJSONString(b, v.Readiness.State)
	b = append(b, `,"checkedAt":`...)
	b = appendTimePtr(b, v.Readiness.CheckedAt)
	b = append(b, `,"overdue":`...)
	b = strconv.AppendBool(b, v.Readiness.Overdue)
	b = append(b, `},"attention":`...)
	if v.Attention == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *v.Attention)
	}
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, v.CreatedAt.Time)
	return append(b, '}')
}
