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
	Tenants(ctx context.Context) ([]*Tenant, error)
}

// ValidateTenantName checks a tenant name as typed by an administrator.
func ValidateTenantName(name string) error {
	if n := len([]rune(name)); n == 0 || n > 200 {
		return FieldError("name", "name must be 1 to 200 characters")
	}
	return nil
}
