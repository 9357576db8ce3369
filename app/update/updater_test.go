package update

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/update/githubtest"
)

// memMaintenance is an in-memory app.MaintenanceService that records every
// phase stored.
type memMaintenance struct {
	mu     sync.Mutex
	m      *app.Maintenance
	phases []string
}

func (s *memMaintenance) Maintenance(context.Context) (*app.Maintenance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return nil, app.NotFound("maintenance")
	}
	c := *s.m
	return &c, nil
}

func (s *memMaintenance) UpdateMaintenance(_ context.Context, fn func(*app.Maintenance) (*app.Maintenance, error)) (*app.Maintenance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur *app.Maintenance
	if s.m != nil {
		c := *s.m
		cur = &c
	}
	next, err := fn(cur)
	if err != nil {
		return nil, err
	}
	s.m = next
	if next != nil {
		s.phases = append(s.phases, next.Phase)
	}
	return next, nil
}

const testAsset = "backstop-test-os-arch"

func releaseFiles(t *testing.T, priv ed25519.PrivateKey, binary []byte) map[string][]byte {
	t.Helper()
	h := sha256.Sum256(binary)
	sums := []byte(hex.EncodeToString(h[:]) + "  " + testAsset + "\n")
	return map[string][]byte{testAsset: binary, SumsName: sums, SignatureName: ed25519.Sign(priv, sums)}
}

func TestUpdaterApply(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	good := releaseFiles(t, priv, []byte("new binary"))
	tampered := releaseFiles(t, priv, []byte("new binary"))
	tampered[testAsset] = []byte("evil binary")
	badSig := releaseFiles(t, otherPriv, []byte("new binary"))
	noSig := releaseFiles(t, priv, []byte("new binary"))
	delete(noSig, SignatureName)

	tests := []struct {
		name      string
		assets    map[string][]byte
		wantPhase string
		wantErr   string
		wantExe   string
	}{
		{"good", good, app.MaintenanceRestarting, "", "new binary"},
		{"tampered asset", tampered, app.MaintenanceFailed, ErrChecksum.Error(), "old binary"},
		{"bad signature", badSig, app.MaintenanceFailed, ErrBadSignature.Error(), "old binary"},
		{"no signature file", noSig, app.MaintenanceFailed, "has no asset SHA256SUMS.sig", "old binary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const repo = "backstop-dev/backstop"
			at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
			gh := githubtest.New(repo, nil, githubtest.Release{Tag: "v1.3.0", CreatedAt: at, PublishedAt: at, Assets: tt.assets})
			defer gh.Close()
			exe := filepath.Join(t.TempDir(), "backstop")
			os.WriteFile(exe, []byte("old binary"), 0o755)
			maint := &memMaintenance{m: &app.Maintenance{Phase: app.MaintenanceAnnounced, TargetVersion: "1.3.0", FromVersion: "1.2.0"}}
			restarted := ""
			u := NewUpdater(maint, UpdaterOptions{APIURL: gh.URL, Repository: repo, Version: "1.2.0", Key: pub,
				ExePath: exe, AssetName: testAsset, Restart: func(p string) error { restarted = p; return nil }})
			got := u.Poll(context.Background())
			if got != (tt.wantPhase == app.MaintenanceRestarting) || (restarted != "") != got {
				t.Errorf("Poll = %v, restart %q", got, restarted)
			}
			m, _ := maint.Maintenance(context.Background())
			if m.Phase != tt.wantPhase || (tt.wantErr == "") != (m.Error == nil) || (m.Error != nil && !strings.Contains(*m.Error, tt.wantErr)) {
				t.Errorf("record %+v (error %v), want phase %s error %q", m, m.Error, tt.wantPhase, tt.wantErr)
			}
			if b, _ := os.ReadFile(exe); string(b) != tt.wantExe {
				t.Errorf("binary %q, want %q", b, tt.wantExe)
			}
			if tt.wantPhase == app.MaintenanceRestarting {
				want := []string{"downloading", "verifying", "applying", "restarting"}
				if strings.Join(maint.phases, ",") != strings.Join(want, ",") {
					t.Errorf("phases %v, want %v", maint.phases, want)
				}
			}
		})
	}
}

func TestUpdaterAfterRestart(t *testing.T) {
	restarting := func() *memMaintenance {
		return &memMaintenance{m: &app.Maintenance{Phase: app.MaintenanceRestarting, TargetVersion: "1.3.0", FromVersion: "1.2.0"}}
	}
	ctx := context.Background()

	// The new version clears the record once ready, not before.
	maint, ready := restarting(), false
	u := NewUpdater(maint, UpdaterOptions{Version: "1.3.0", Ready: func(context.Context) bool { return ready }})
	u.Poll(ctx)
	if m, _ := maint.Maintenance(ctx); m == nil || m.Phase != app.MaintenanceRestarting {
		t.Fatalf("cleared before ready: %+v", m)
	}
	ready = true
	u.Poll(ctx)
	if _, err := maint.Maintenance(ctx); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("not cleared when ready: %v", err)
	}

	// The old version back in place means the watchdog rolled back.
	maint = restarting()
	NewUpdater(maint, UpdaterOptions{Version: "1.2.0"}).Poll(ctx)
	if m, _ := maint.Maintenance(ctx); m.Phase != app.MaintenanceFailed || m.Error == nil || !strings.Contains(*m.Error, "rolled back") {
		t.Fatalf("after rollback: %+v", m)
	}

	// A phase nobody works on any more (the process died mid-download).
	maint = &memMaintenance{m: &app.Maintenance{Phase: app.MaintenanceDownloading, TargetVersion: "1.3.0"}}
	NewUpdater(maint, UpdaterOptions{Version: "1.2.0"}).Poll(ctx)
	if m, _ := maint.Maintenance(ctx); m.Phase != app.MaintenanceFailed || !bytes.Contains([]byte(*m.Error), []byte("interrupted")) {
		t.Fatalf("interrupted: %+v", m)
	}
}
