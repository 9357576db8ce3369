package archive

import "context"

// STUB of the intake part, replaced by its implementation (delete this file).

type intake struct{}

func newIntake(s *Service) (*intake, error) { return &intake{}, nil }

func (p *intake) run(ctx context.Context) { <-ctx.Done() }

// IntakeStore is the intake part's SQL.
type IntakeStore interface{}
