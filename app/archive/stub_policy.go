package archive

import "context"

// STUB of the policy part, replaced by its implementation (delete this file).

type policy struct{}

func newPolicy(s *Service) (*policy, error) { return &policy{}, nil }

func (p *policy) run(ctx context.Context) { <-ctx.Done() }

// PolicyStore is the policy part's SQL.
type PolicyStore interface{}
