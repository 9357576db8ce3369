package app

import "context"

// Tenant is one customer of the MSP. Every protected thing belongs to one.
type Tenant struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt Time   `json:"createdAt"`
}

// TenantService stores tenants.
type TenantService interface {
	CreateTenant(ctx context.Context, t *Tenant) error
	Tenant(ctx context.Context, id string) (*Tenant, error)
	// Tenants lists tenants in creation (id) order.
	Tenants(ctx context.Context, f TenantFilter) ([]*Tenant, error)
}

// TenantFilter pages the tenant list.
type TenantFilter struct {
	AfterID string // cursor: tenants with a greater id
	Limit   int    // 0 means no limit
}

// ValidateTenantName checks a tenant name as typed by an administrator.
func ValidateTenantName(name string) error {
	if n := len([]rune(name)); n == 0 || n > 200 {
		return FieldError("name", "name must be 1 to 200 characters")
	}
	return nil
}
