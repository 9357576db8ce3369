package archive

import "context"

// STUB of the capture part, replaced by its implementation (delete this file).

type capture struct{}

func newCapture(s *Service) (*capture, error) { return &capture{}, nil }

func (p *capture) run(ctx context.Context) { <-ctx.Done() }

// CaptureStore is the capture part's SQL.
type CaptureStore interface{}

// CaptureSources reads the IMAP and Microsoft 365 sources polling channels
// capture from.
type CaptureSources interface{}
