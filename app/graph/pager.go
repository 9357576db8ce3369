package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Pages GETs url and follows @odata.nextLink, handing each page's value
// to page, until a page without nextLink; it returns that page's
// @odata.deltaLink ("" for a collection that is not a delta).
func (c *Client) Pages(ctx context.Context, scope Scope, url string, header http.Header, page func(value []json.RawMessage) error) (deltaLink string, err error) {
	for url != "" {
		var p struct {
			Value     []json.RawMessage `json:"value"`
			NextLink  string            `json:"@odata.nextLink"`
			DeltaLink string            `json:"@odata.deltaLink"`
		}
		if err := c.JSON(ctx, scope, http.MethodGet, url, header, nil, &p); err != nil {
			return "", err
		}
		if err := page(p.Value); err != nil {
			return "", err
		}
		if p.NextLink == url {
			return "", fmt.Errorf("graph: nextLink repeats the page it is on: %s", url)
		}
		url, deltaLink = p.NextLink, p.DeltaLink
	}
	return deltaLink, nil
}

// pagesOf is Pages decoding each entry into T.
func pagesOf[T any](ctx context.Context, c *Client, scope Scope, url string, header http.Header, fn func([]T) error) (string, error) {
	return c.Pages(ctx, scope, url, header, func(value []json.RawMessage) error {
		items := make([]T, len(value))
		for i, v := range value {
			if err := json.Unmarshal(v, &items[i]); err != nil {
				return fmt.Errorf("graph: decoding a page of %s: %w", url, err)
			}
		}
		return fn(items)
	})
}

// collect gathers every entry of a collection.
func collect[T any](ctx context.Context, c *Client, scope Scope, url string, header http.Header) ([]T, error) {
	var all []T
	_, err := pagesOf(ctx, c, scope, url, header, func(items []T) error {
		all = append(all, items...)
		return nil
	})
	return all, err
}

// preferPageSize asks for n entries a page (Prefer: odata.maxpagesize).
func preferPageSize(n int) http.Header {
	return http.Header{"Prefer": {fmt.Sprintf("odata.maxpagesize=%d", n)}}
}
