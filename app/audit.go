package app

import (
	"context"
	"time"
)

// Actor types of an audit row.
const (
	ActorUser   = "user"
	ActorKey    = "key"
	ActorSystem = "system"
)

// AuditEntry is one row of the audit log: who did what, for whom, from where
// and with what outcome. A key is named by id and name, never its secret.
// Rows written for an API key and for a web session are identical in shape.
type AuditEntry struct {
	ID        int64  `json:"id"`
	At        Time   `json:"at"`
	ActorType string `json:"actorType"`
	ActorID   string `json:"actorId"`
	ActorName string `json:"actorName"`
	TenantID  string `json:"tenantId"` // tenant acted for; "" when across all tenants
	Action    string `json:"action"`   // operation id, e.g. "endpoints.list"
	Target    string `json:"target"`   // resource path or id
	Status    int    `json:"status"`   // HTTP status of the answer
	IP        string `json:"ip"`
	UserAgent string `json:"userAgent"`
	RequestID string `json:"requestId"`
}

// AuditFilter selects audit rows, newest first.
type AuditFilter struct {
	TenantID string // "" for all
	ActorID  string
	Since    *time.Time
	Until    *time.Time
	BeforeID int64 // cursor: rows with a smaller id
	Limit    int
}

// AuditService stores the audit log.
type AuditService interface {
	// WriteAudit stores the row durably before returning.
	WriteAudit(ctx context.Context, e *AuditEntry) error
	AuditEntries(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
}
