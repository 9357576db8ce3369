package resticrepo

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// op names a counted operation.
type op int

const (
	opCreate op = iota
	opRead      // GET or HEAD of a file
	opWrite     // an upload that was stored
	opList
	opDelete
	opRefused // any answer 4xx/5xx after authentication that is not a missing file
	numOps
)

// repoState is what the handler keeps in memory for one endpoint: the lock
// that makes "refuse if it exists, else rename" atomic, the quota account,
// and the counters behind Stats.
type repoState struct {
	// mu serialises the final existence check and rename of uploads, and
	// guards the quota fields.
	mu       sync.Mutex
	scanned  bool  // used holds the repository's size
	used     int64 // bytes of stored files
	reserved int64 // bytes promised to uploads in flight

	ops               [numOps]atomic.Int64
	bytesIn, bytesOut atomic.Int64
}

// state returns the endpoint's state, creating it on first use. The map
// grows with the number of endpoints that ever connected, which is small.
func (h *Handler) state(endpointID string) *repoState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.repos[endpointID]
	if st == nil {
		st = &repoState{}
		h.repos[endpointID] = st
	}
	return st
}

// Rescan makes the quota account of an endpoint's repository sum its files
// again at the next upload. Call it after something other than the handler
// changed the repository (the appliance's retention prune deletes packs).
func (h *Handler) Rescan(endpointID string) {
	st := h.state(endpointID)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.scanned, st.used = false, 0
}

func (st *repoState) count(o op, bytes int64) {
	st.ops[o].Add(1)
	switch o {
	case opWrite:
		st.bytesIn.Add(bytes)
	case opRead:
		st.bytesOut.Add(bytes)
	}
}

// errQuota is an upload that would take the repository over its quota.
var errQuota = errors.New("repository quota exceeded")

// reserve promises n bytes to an upload and returns what it reserved, or
// errQuota when the repository's stored bytes plus uploads in flight plus
// n exceed quota. The first reservation sums the repository's files once;
// after that the account is kept by settle and release. Without a quota
// (0) it reserves nothing and never scans.
func (st *repoState) reserve(root *os.Root, quota, n int64) (int64, error) {
	if quota == 0 {
		return 0, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.scanned {
		used, err := repoSize(root)
		if err != nil {
			return 0, err
		}
		st.used, st.scanned = used, true
	}
	if st.used+st.reserved+n > quota {
		return 0, errQuota
	}
	st.reserved += n
	return n, nil
}

// remaining is what the quota still allows, for uploads of unknown size;
// -1 without a quota or before the first scan.
func (st *repoState) remaining(quota int64) int64 {
	if quota == 0 {
		return -1
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.scanned {
		return -1
	}
	return max(0, quota-st.used-st.reserved)
}

// settle ends a reservation of n bytes (what reserve returned); stored
// bytes become used.
func (st *repoState) settle(n, stored int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.reserved -= n
	if st.scanned {
		st.used += stored
	}
}

// release returns the bytes of a deleted file to the account.
func (st *repoState) release(n int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.scanned {
		st.used = max(0, st.used-n)
	}
}

// repoSize sums the sizes of the regular files in the repository.
func repoSize(root *os.Root) (int64, error) {
	var total int64
	err := fs.WalkDir(root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
		}
		return nil
	})
	return total, err
}

// Stats are one endpoint's counters since the handler started.
type Stats struct {
	BytesWritten int64 // bytes of stored uploads
	BytesRead    int64 // bytes of file bodies sent
	Creates      int64
	Reads        int64 // GET and HEAD of files
	Writes       int64 // stored uploads
	Lists        int64
	Deletes      int64 // lock deletions
	Refused      int64 // requests refused after authentication
}

// Stats returns the counters of every endpoint that made an authenticated
// request since the handler started, by endpoint id; for metrics.
func (h *Handler) Stats() map[string]Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]Stats, len(h.repos))
	for id, st := range h.repos {
		out[id] = Stats{
			BytesWritten: st.bytesIn.Load(), BytesRead: st.bytesOut.Load(),
			Creates: st.ops[opCreate].Load(), Reads: st.ops[opRead].Load(), Writes: st.ops[opWrite].Load(),
			Lists: st.ops[opList].Load(), Deletes: st.ops[opDelete].Load(), Refused: st.ops[opRefused].Load(),
		}
	}
	return out
}
