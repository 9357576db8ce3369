package archive

import (
	"context"
	"errors"
	"io"
)

// PENDING: aintake's OpenContent replaces this (delete the file on merge).
func (s *Service) OpenContent(ctx context.Context, tenantID, messageID string) (io.ReadCloser, error) {
	return nil, errors.New("pending")
}
