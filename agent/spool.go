package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"backstop/agentapi/wire"
)

// Spool keeps finished-run reports on disk until the appliance has accepted
// them, so a report survives an unreachable appliance and an agent restart.
//
// Exactly once: a report is written (temp file, fsync, rename) before it is
// first sent and removed only after the appliance accepted it. A crash
// between acceptance and removal sends it again; the appliance treats a
// second finish of the same run id as a no-op, so it is recorded once.
type Spool struct {
	Dir    string
	Client *Client
	Logger *slog.Logger
	mu     sync.Mutex // one flush at a time
}

// Put stores a report durably.
func (s *Spool) Put(f wire.Finish) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.Dir, f.Run.RunID+".json", b)
}

// Pending lists the spooled reports' run ids, oldest run first.
func (s *Spool) Pending() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasPrefix(name, "run_") && strings.HasSuffix(name, ".json") {
			ids = append(ids, strings.TrimSuffix(name, ".json"))
		}
	}
	sort.Strings(ids) // run ids start with a timestamp
	return ids, nil
}

// Flush sends every spooled report in order and removes those accepted. It
// stops at the first report the appliance cannot take now (unreachable,
// 5xx, 401) and returns that error; the rest stay for the next flush. A
// report the appliance rejects as malformed is moved to spool/rejected so
// it cannot block the others.
func (s *Spool) Flush(ctx context.Context) (sent int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids, err := s.Pending()
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		path := filepath.Join(s.Dir, id+".json")
		var f wire.Finish
		if err := readJSON(path, &f); err != nil {
			s.reject(id, err)
			continue
		}
		_, err := s.Client.Finish(ctx, f)
		switch {
		case err == nil:
			if err := os.Remove(path); err != nil {
				return sent, err
			}
			sent++
		case IsUnauthorized(err):
			return sent, err
		case isPermanent(err):
			s.reject(id, err)
		default:
			return sent, fmt.Errorf("report of %s stays spooled: %w", id, err)
		}
	}
	return sent, nil
}

func (s *Spool) reject(id string, why error) {
	dir := filepath.Join(s.Dir, "rejected")
	if s.Logger != nil {
		s.Logger.Error("run report rejected; kept in "+dir, slog.String("run_id", id), slog.Any("error", why))
	}
	if os.MkdirAll(dir, 0o700) == nil {
		os.Rename(filepath.Join(s.Dir, id+".json"), filepath.Join(dir, id+".json"))
	}
}
