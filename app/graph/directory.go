package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// User is a /users entry as $select'ed.
type User struct {
	ID                string            `json:"id"`
	DisplayName       string            `json:"displayName"`
	Mail              string            `json:"mail"`
	UserPrincipalName string            `json:"userPrincipalName"`
	AccountEnabled    bool              `json:"accountEnabled"`
	UserType          string            `json:"userType"`
	AssignedLicenses  []AssignedLicense `json:"assignedLicenses"`
}

// AssignedLicense is one licence of a user.
type AssignedLicense struct {
	SkuID string `json:"skuId"`
}

// SubscribedSku is one of the tenant's licence SKUs.
type SubscribedSku struct {
	SkuID         string `json:"skuId"`
	SkuPartNumber string `json:"skuPartNumber"`
}

// Users pages through every user (999 per page), calling fn per page (up to
// pageBatch users at a time).
func (c *Client) Users(ctx context.Context, fn func([]User) error) error {
	_, err := pagesOf(ctx, c, ScopeDirectory,
		"/users?$select=id,displayName,mail,userPrincipalName,accountEnabled,userType,assignedLicenses&$top=999",
		nil, fn)
	return err
}

// SubscribedSkus lists the tenant's SKUs.
func (c *Client) SubscribedSkus(ctx context.Context) ([]SubscribedSku, error) {
	return collect[SubscribedSku](ctx, c, ScopeDirectory, "/subscribedSkus?$select=skuId,skuPartNumber", nil)
}

// noMailboxCodes are the answers of mailbox calls on a user without an
// Exchange Online mailbox (research §4).
var noMailboxCodes = []string{"MailboxNotEnabledForRESTAPI", "ResourceNotFound", "ErrorInvalidUser", "Request_ResourceNotFound"}

// purposeBatches is how many $batch calls of UserPurposes run at once.
const purposeBatches = 4

// UserPurposes reads mailboxSettings.userPurpose (user, shared, room,
// equipment, linked, others) of each user through $batch, 20 per batch.
// A user without a mailbox (MailboxNotEnabledForRESTAPI and the like) maps
// to "". Other failures are returned.
func (c *Client) UserPurposes(ctx context.Context, userIDs []string) (map[string]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		purposes = make(map[string]string, len(userIDs))
		firstErr error
		wg       sync.WaitGroup
		slots    = make(chan struct{}, purposeBatches)
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	for start := 0; start < len(userIDs); start += MaxBatch {
		ids := userIDs[start:min(start+MaxBatch, len(userIDs))]
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			got, err := c.purposeBatch(ctx, ids)
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for id, p := range got {
				purposes[id] = p
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return purposes, nil
}

func (c *Client) purposeBatch(ctx context.Context, ids []string) (map[string]string, error) {
	reqs := make([]BatchRequest, len(ids))
	for i, id := range ids {
		reqs[i] = BatchRequest{ID: strconv.Itoa(i), Method: http.MethodGet,
			URL: "/users/" + url.PathEscape(id) + "/mailboxSettings?$select=userPurpose"}
	}
	answers, err := c.Batch(ctx, ScopeDirectory, reqs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ids))
	for i, a := range answers {
		if err := a.Err(); err != nil {
			if a.Status == http.StatusNotFound || IsCode(err, noMailboxCodes...) {
				out[ids[i]] = ""
				continue
			}
			return nil, fmt.Errorf("graph: mailboxSettings of %s: %w", ids[i], err)
		}
		var s struct {
			UserPurpose string `json:"userPurpose"`
		}
		if err := json.Unmarshal(a.Body, &s); err != nil {
			return nil, fmt.Errorf("graph: mailboxSettings of %s: %w", ids[i], err)
		}
		out[ids[i]] = s.UserPurpose
	}
	return out, nil
}
