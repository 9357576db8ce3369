package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Pages GETs url and follows @odata.nextLink, handing each page's value
// to page (up to pageBatch entries at a time), until a page without nextLink; it returns that page's
// @odata.deltaLink ("" for a collection that is not a delta).
func (c *Client) Pages(ctx context.Context, scope Scope, url string, header http.Header, page func(value []json.RawMessage) error) (deltaLink string, err error) {
	return pagesOf(ctx, c, scope, url, header, page)
}

// pageBatch is the most entries pagesOf decodes before handing them on: a
// page of 500 messages is never held decoded (nor as raw JSON) at once.
const pageBatch = 100

// pagesOf is Pages decoding each entry into T. It decodes each page as it
// arrives, handing fn up to pageBatch entries at a time in page order (fn
// must not keep the slice).
func pagesOf[T any](ctx context.Context, c *Client, scope Scope, url string, header http.Header, fn func([]T) error) (string, error) {
	deltaLink := ""
	for url != "" {
		next, delta, err := streamPage(ctx, c, scope, url, header, fn)
		if err != nil {
			return "", err
		}
		if next == url {
			return "", fmt.Errorf("graph: nextLink repeats the page it is on: %s", url)
		}
		url, deltaLink = next, delta
	}
	return deltaLink, nil
}

// streamPage GETs one page and decodes its value entry by entry.
func streamPage[T any](ctx context.Context, c *Client, scope Scope, url string, header http.Header, fn func([]T) error) (next, delta string, err error) {
	req := &Request{Method: http.MethodGet, URL: url, Header: header.Clone()}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(ctx, scope, req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	bad := func(err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("graph: decoding a page of %s: %w", url, err)
	}
	dec := json.NewDecoder(resp.Body)
	if err := expectDelim(dec, '{'); err != nil {
		return "", "", bad(err)
	}
	var batch []T
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", bad(err)
		}
		switch key, _ := tok.(string); key {
		case "value":
			if tok, err := dec.Token(); err != nil {
				return "", "", bad(err)
			} else if tok == nil { // "value": null
				continue
			} else if d, ok := tok.(json.Delim); !ok || d != '[' {
				return "", "", bad(fmt.Errorf("value is not an array"))
			}
			for dec.More() {
				if batch == nil {
					batch = make([]T, 0, pageBatch)
				}
				batch = append(batch, *new(T))
				if err := dec.Decode(&batch[len(batch)-1]); err != nil {
					return "", "", bad(err)
				}
				if len(batch) == pageBatch {
					if err := fn(batch); err != nil {
						return "", "", err
					}
					batch = nil
				}
			}
			if err := expectDelim(dec, ']'); err != nil {
				return "", "", bad(err)
			}
		case "@odata.nextLink":
			if err := dec.Decode(&next); err != nil {
				return "", "", bad(err)
			}
		case "@odata.deltaLink":
			if err := dec.Decode(&delta); err != nil {
				return "", "", bad(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", "", bad(err)
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return "", "", bad(err)
	}
	if len(batch) > 0 {
		if err := fn(batch); err != nil {
			return "", "", err
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body) // let the connection be reused
	return next, delta, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, got %v", want, tok)
	}
	return nil
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
