package graph

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mailboxOf is the user id of a /users/{id}/… path.
func mailboxOf(r *http.Request) string {
	rest, _ := strings.CutPrefix(r.URL.Path, "/users/")
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// TestRetryAfterFencesOnlyItsMailbox throttles mailbox "a": every request
// of "a" in the first 100 ms gets 429 Retry-After: 1. A request of "a"
// arriving after those answers and before their second has passed is a
// violation; mailbox "b" must carry on meanwhile.
func TestRetryAfterFencesOnlyItsMailbox(t *testing.T) {
	var (
		mu         sync.Mutex
		first      time.Time
		fenceEnd   time.Time
		violations []string
		bDone      atomic.Int64
	)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		if mailboxOf(r) == "b" {
			bDone.Add(1)
			writeJSON(w, 200, map[string]string{"id": "m"})
			return
		}
		mu.Lock()
		if first.IsZero() {
			first = now
		}
		window := first.Add(100 * time.Millisecond)
		switch {
		case now.Before(window):
			mu.Unlock()
			time.Sleep(time.Until(window))
			mu.Lock()
			fenceEnd = time.Now().Add(time.Second)
			mu.Unlock()
			w.Header().Set("Retry-After", "1")
			graphError(w, 429, "ApplicationThrottled")
			return
		case now.Before(fenceEnd):
			violations = append(violations, fmt.Sprintf("%s arrived %s before Retry-After passed", r.URL.Path, fenceEnd.Sub(now)))
		}
		mu.Unlock()
		writeJSON(w, 200, map[string]string{"id": "m"})
	})
	c := f.client(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	var bFinished time.Time
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.JSON(ctx, Mailbox("a"), "GET", fmt.Sprintf("/users/a/messages/%d", i), nil, nil, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(150 * time.Millisecond) // "a" is fenced now
	for i := range 10 {
		if err := c.JSON(ctx, Mailbox("b"), "GET", fmt.Sprintf("/users/b/messages/%d", i), nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	bFinished = time.Now()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("%d violations: %v", len(violations), violations)
	}
	if !bFinished.Before(fenceEnd) {
		t.Errorf("mailbox b waited for mailbox a's Retry-After")
	}
	if bDone.Load() != 10 {
		t.Errorf("b answered %d, want 10", bDone.Load())
	}
}

// inFlight counts requests in flight per key and overall.
type inFlight struct {
	mu       sync.Mutex
	now      map[string]int
	max      map[string]int
	total    int
	maxTotal int
}

func (f *inFlight) enter(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now == nil {
		f.now, f.max = map[string]int{}, map[string]int{}
	}
	f.now[key]++
	f.max[key] = max(f.max[key], f.now[key])
	f.total++
	f.maxTotal = max(f.maxTotal, f.total)
}

func (f *inFlight) leave(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now[key]--
	f.total--
}

func runMailboxes(t *testing.T, limits *Limits) *inFlight {
	var fl inFlight
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		key := mailboxOf(r)
		fl.enter(key)
		time.Sleep(10 * time.Millisecond)
		fl.leave(key) // before answering: the client may send the next one once it has the answer
		writeJSON(w, 200, map[string]string{"id": "m"})
	})
	c := f.client(t, func(c *Config) { c.Limits = limits })
	var wg sync.WaitGroup
	for m := range 10 {
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := fmt.Sprintf("u%d", m)
				if err := c.JSON(context.Background(), Mailbox(user), "GET", fmt.Sprintf("/users/%s/messages/%d", user, i), nil, nil, nil); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	return &fl
}

func TestPerMailboxConcurrency(t *testing.T) {
	fl := runMailboxes(t, nil)
	for m, n := range fl.max {
		if n > 4 {
			t.Errorf("mailbox %s had %d requests in flight, want ≤ 4", m, n)
		}
	}
	if fl.maxTotal <= 4 {
		t.Errorf("at most %d in flight overall: mailboxes did not run in parallel", fl.maxTotal)
	}
}

func TestGlobalLimit(t *testing.T) {
	fl := runMailboxes(t, NewLimits(3))
	if fl.maxTotal > 3 {
		t.Errorf("%d in flight overall, limit 3", fl.maxTotal)
	}
}

func TestSlotHeldUntilBodyClosed(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("MIME")) })
	c := f.client(t, func(c *Config) { c.PerMailbox = 1 })
	body, err := c.MessageMIME(context.Background(), "u1", "m1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.MessageMIME(ctx, "u1", "m2"); err == nil {
		t.Fatal("a second request got the only slot while the first body was open")
	}
	body.Close()
	second, err := c.MessageMIME(context.Background(), "u1", "m2")
	if err != nil {
		t.Fatal(err)
	}
	second.Close()
}
