package archive_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app/archive/chain"

	"golang.org/x/mod/sumdb/tlog"
)

// TestKill9Child is the appliance side of TestKill9DuringIntake: the
// intake and its SMTP server in a child process, until killed.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv("ARCHIVE_KILL9_DIR")
	if dir == "" {
		t.Skip("run by TestKill9DuringIntake")
	}
	f := newFixture(t, opts{dir: dir, tenant: os.Getenv("ARCHIVE_KILL9_TENANT"), every: 200 * time.Millisecond, blobs: true})
	addr := f.listen(nil)
	os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(addr), 0o600)
	os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr"))
	select {}
}

// TestKill9DuringIntake kills the appliance (SIGKILL) while 8 senders
// deliver; every message answered 250 must be there after a restart: its
// exact bytes, its record, and the record's inclusion in a new checkpoint.
func TestKill9DuringIntake(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9")
	}
	for round := 0; round < 3; round++ {
		dir := t.TempDir()
		f := newFixture(t, opts{dir: dir, every: time.Hour})
		ch := f.channel()
		tenant := f.tenant
		f.stop()
		f.db.Close()

		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.v")
		cmd.Env = append(os.Environ(), "ARCHIVE_KILL9_DIR="+dir, "ARCHIVE_KILL9_TENANT="+tenant)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var addr []byte
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(filepath.Join(dir, "addr")); err == nil {
				addr = b
				break
			}
			if time.Since(start) > 20*time.Second {
				cmd.Process.Kill()
				t.Fatalf("child did not start: %s", out.String())
			}
		}
		var mu sync.Mutex
		acked := map[string][]byte{} // sha -> bytes answered 250
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for s := 0; s < 8; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					raw := testMessage(round*1_000_000+s*100_000+i, 20<<10)
					if err := send(string(addr), []string{ch.Address}, raw); err == nil {
						mu.Lock()
						acked[sha(raw)] = raw
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		close(stop)
		wg.Wait()

		g := newFixture(t, opts{dir: dir, tenant: tenant, every: time.Hour, blobs: true})
		ctx := context.Background()
		if len(acked) == 0 {
			t.Fatalf("round %d: nothing was acknowledged", round)
		}
		for s, raw := range acked {
			sm, err := g.db.ArchiveMessageBySHA(ctx, tenant, s)
			if err != nil {
				t.Fatalf("round %d: a message answered 250 is missing: %v", round, err)
			}
			if got := g.content(sm.ID); !bytes.Equal(got, raw) {
				t.Fatalf("round %d: bytes of %s differ", round, sm.ID)
			}
			p, err := g.svc.Record(ctx, tenant, sm.RecordIndex, true)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := chain.OpenCheckpoint(p.Checkpoint, g.signer.VerifierKey(), "")
			if err != nil {
				t.Fatal(err)
			}
			var proof tlog.RecordProof
			for _, h := range p.Proof {
				b, _ := base64.StdEncoding.DecodeString(h)
				proof = append(proof, tlog.Hash(b))
			}
			if err := tlog.CheckRecord(proof, cp.Size, cp.Root, sm.RecordIndex, chain.LeafHash([]byte(p.Record))); err != nil ||
				!strings.Contains(p.Record, "sha256 "+s) {
				t.Fatalf("round %d: record %d not proven: %v", round, sm.RecordIndex, err)
			}
		}
		if _, err := g.svc.VerifyChain(ctx, tenant, "", nil); err != nil {
			t.Fatalf("round %d: verify after the crash: %v", round, err)
		}
		n, _ := g.db.ArchiveSize(ctx, tenant)
		t.Logf("round %d: %d messages acknowledged, %d records after the restart", round, len(acked), n)
		g.stop()
	}
}
