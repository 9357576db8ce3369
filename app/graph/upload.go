package graph

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// uploadSession PUTs size bytes of r to a pre-authenticated upload URL in
// pieces of chunk bytes (Content-Range bytes a-b/total, no Authorization)
// and returns the body of the final answer. Intermediate answers (202, or
// 200 with nextExpectedRanges for attachments) are read and dropped; the
// session is deleted when the upload fails.
func (c *Client) uploadSession(ctx context.Context, scope Scope, uploadURL string, size int64, r io.Reader, chunk int) (final []byte, err error) {
	defer func() {
		if err != nil {
			c.cancelUpload(scope, uploadURL)
		}
	}()
	buf := make([]byte, min(int64(chunk), size))
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return nil, fmt.Errorf("graph: reading upload at byte %d of %d: %w", off, size, err)
		}
		end := off + int64(n)
		resp, err := c.Do(ctx, scope, &Request{
			Method: http.MethodPut,
			URL:    uploadURL,
			Header: http.Header{
				"Content-Range": {fmt.Sprintf("bytes %d-%d/%d", off, end-1, size)},
				"Content-Type":  {"application/octet-stream"},
			},
			Body:   buf[:n],
			NoAuth: true,
		})
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("graph: upload answer: %w", err)
		}
		off = end
		if off == size {
			return body, nil
		}
	}
	return nil, errors.New("graph: empty upload session")
}

// cancelUpload deletes an abandoned session so its storage is freed; it
// is best effort and must work after ctx is cancelled.
func (c *Client) cancelUpload(scope Scope, uploadURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := c.Do(ctx, scope, &Request{Method: http.MethodDelete, URL: uploadURL, NoAuth: true}); err == nil {
		resp.Body.Close()
	}
}
