package targets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"backstop/app"
	"backstop/app/blobstore"

	"github.com/dustin/go-humanize"
)

// The state of a target (CONTRACT §11), decided by a check:
//
//   - unreachable: the check could not connect (ErrUnreachable), or the
//     target did not answer within CheckTimeout;
//   - full: the target said so (ErrFull), or its free space is under
//     MinFreeBytes;
//   - degraded: reachable, but a write, read, conditional create or
//     delete failed for another reason (ErrDenied among them);
//   - ok otherwise.

// CheckAll checks every target, at the same time, and saves each state.
func (m *Manager) CheckAll(ctx context.Context) {
	ts, err := m.cfg.Store.StorageTargets(ctx, app.StorageTargetFilter{})
	if err != nil {
		if ctx.Err() == nil {
			m.cfg.Logger.Error("listing storage targets to check failed", slog.Any("error", err))
		}
		return
	}
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.CheckTarget(ctx, t.ID)
		}()
	}
	wg.Wait()
}

// CheckTarget checks one target and saves its state, unless ctx ended
// during the check (a shutdown is not the target's fault).
func (m *Manager) CheckTarget(ctx context.Context, id string) {
	var st app.StorageTargetState
	b, err := m.Backend(ctx, id)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return
	} else if err != nil {
		st = m.failed(err)
	} else {
		st = m.evaluate(ctx, b)
	}
	if ctx.Err() != nil {
		return
	}
	prev, _ := m.cfg.Store.StorageTarget(ctx, id)
	if err := m.cfg.Store.SaveStorageTargetState(ctx, id, st); err != nil {
		if ctx.Err() == nil && app.ErrorCode(err) != app.ENOTFOUND {
			m.cfg.Logger.Error("saving a storage target's state failed", slog.String("target_id", id), slog.Any("error", err))
		}
		return
	}
	if prev != nil && prev.State != st.State {
		attrs := []any{slog.String("target_id", id), slog.String("from", prev.State), slog.String("to", st.State)}
		if st.LastError != nil {
			attrs = append(attrs, slog.String("reason", *st.LastError))
		}
		if st.State == app.StorageOK {
			m.cfg.Logger.Info("storage target state changed", attrs...)
		} else {
			m.cfg.Logger.Warn("storage target state changed", attrs...)
		}
	}
}

// WriteFailed tells the Manager that a write to the target failed with
// err. A target that said it is full (blobstore.ErrFull) is full from now
// on; any failed write makes the monitor re-check the target soon (at
// once when idle), so its state reflects what the write met. It never
// blocks on the check.
func (m *Manager) WriteFailed(targetID string, err error) {
	if err == nil {
		return
	}
	if errors.Is(err, blobstore.ErrFull) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t, gerr := m.cfg.Store.StorageTarget(ctx, targetID)
		if gerr == nil {
			msg := "a write failed: " + err.Error()
			st := app.StorageTargetState{State: app.StorageFull, CapacityBytes: t.CapacityBytes, UsedBytes: t.UsedBytes,
				FreeBytes: t.FreeBytes, CheckedAt: m.cfg.Now(), LastError: &msg}
			gerr = m.cfg.Store.SaveStorageTargetState(ctx, targetID, st)
		}
		cancel()
		if gerr != nil {
			m.cfg.Logger.Error("marking a storage target full failed", slog.String("target_id", targetID), slog.Any("error", gerr))
		}
	}
	m.mu.Lock()
	m.pending[targetID] = true
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default: // a wake-up is already queued; it takes every pending target
	}
}

// evaluate checks b: the probe of blobstore.Check, then its free space.
func (m *Manager) evaluate(ctx context.Context, b blobstore.Backend) app.StorageTargetState {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CheckTimeout)
	defer cancel()
	if err := blobstore.Check(cctx, b); err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: the target did not answer within %s", blobstore.ErrUnreachable, m.cfg.CheckTimeout)
		}
		st := m.failed(err)
		if sp, serr := b.Space(cctx); serr == nil {
			setSpace(&st, sp)
		}
		return st
	}
	st := app.StorageTargetState{State: app.StorageOK, CheckedAt: m.cfg.Now()}
	sp, err := b.Space(cctx)
	if err != nil {
		return m.failed(fmt.Errorf("reading free space failed: %w", err))
	}
	setSpace(&st, sp)
	if sp.Known && sp.FreeBytes < m.cfg.MinFreeBytes {
		st.State = app.StorageFull
		st.LastError = app.Ptr(fmt.Sprintf("only %s free, under storage.min_free_bytes (%s)",
			humanize.IBytes(uint64(max(sp.FreeBytes, 0))), humanize.IBytes(uint64(m.cfg.MinFreeBytes))))
	}
	return st
}

// failed is the state of a target whose check or opening failed with err.
func (m *Manager) failed(err error) app.StorageTargetState {
	st := app.StorageTargetState{State: app.StorageDegraded, CheckedAt: m.cfg.Now(), LastError: app.Ptr(err.Error())}
	switch {
	case errors.Is(err, blobstore.ErrUnreachable):
		st.State = app.StorageUnreachable
	case errors.Is(err, blobstore.ErrFull):
		st.State = app.StorageFull
	}
	return st
}

func setSpace(st *app.StorageTargetState, sp blobstore.Space) {
	if !sp.Known {
		return
	}
	st.CapacityBytes, st.FreeBytes = app.Ptr(sp.CapacityBytes), app.Ptr(sp.FreeBytes)
	st.UsedBytes = app.Ptr(max(sp.CapacityBytes-sp.FreeBytes, 0))
}

// applyState copies a check's outcome onto a target about to be stored.
func applyState(t *app.StorageTarget, st app.StorageTargetState) {
	t.State, t.CapacityBytes, t.UsedBytes, t.FreeBytes, t.LastError = st.State, st.CapacityBytes, st.UsedBytes, st.FreeBytes, st.LastError
	t.CheckedAt = app.AtPtr(&st.CheckedAt)
}
