package blobstore_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"backstop/app"
)

// TestKill9 kills a process that backs up, forgets and collects garbage in
// a loop at random moments (during pack writes, manifest writes and every
// step of a collection), then checks that nothing the catalogue names is
// missing or damaged, that every snapshot the process acknowledged and had
// not begun to forget reads back whole, and that no temporary file stays.
func TestKill9(t *testing.T) {
	dir := t.TempDir()
	setup := openFixture(t, dir, "")
	tenant := setup.tenant
	setup.db.Close()

	acked := map[string]bool{}
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Worker$", "-test.v")
		cmd.Env = append(os.Environ(), "BLOBSTORE_KILL9_DIR="+dir, "BLOBSTORE_KILL9_TENANT="+tenant,
			fmt.Sprintf("BLOBSTORE_KILL9_SEED=%d", round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1000)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		deadline := time.After(time.Duration(300+rand.IntN(1500)) * time.Millisecond)
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				if id, ok := strings.CutPrefix(l, "committed "); ok {
					acked[id] = true
				} else if id, ok := strings.CutPrefix(l, "forgetting "); ok {
					delete(acked, id)
				}
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				deadline = nil
			}
		}
		cmd.Wait()

		f := openFixture(t, dir, tenant)
		if n, _ := os.ReadDir(filepath.Join(f.local.Root(), "tmp")); len(n) != 0 {
			t.Fatalf("round %d: %d temporary files left after reopening", round, len(n))
		}
		checkIntact(t, f, acked, round)
		if _, err := f.store.CollectGarbage(context.Background(), tenant); err != nil {
			t.Fatalf("round %d: collection after the kill: %v", round, err)
		}
		checkIntact(t, f, acked, round)
		f.db.Close()
	}
	if len(acked) == 0 {
		t.Fatal("no snapshot was acknowledged in any round: the worker did no work")
	}
}

func checkIntact(t *testing.T, f *fixture, acked map[string]bool, round int) {
	t.Helper()
	ctx := context.Background()
	pc, err := f.store.CheckPacks(ctx, f.tenant, time.Time{})
	if err != nil || len(pc.Damaged) != 0 {
		t.Fatalf("round %d: pack check: %+v %v", round, pc.Damaged, err)
	}
	snaps, err := f.store.Snapshots(ctx, app.SnapshotFilter{TenantID: f.tenant})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range snaps {
		have[s.ID] = true
		sc, err := f.store.VerifySample(ctx, s.ID, 0)
		if err != nil || sc.Mismatched != 0 || int64(sc.Sampled) != s.Items {
			t.Fatalf("round %d: snapshot %s: %+v %v", round, s.ID, sc, err)
		}
	}
	for id := range acked {
		if !have[id] {
			t.Fatalf("round %d: acknowledged snapshot %s is gone", round, id)
		}
	}
	t.Logf("round %d: %d packs, %d snapshots intact", round, pc.Packs, len(snaps))
}

// TestKill9Worker is the process TestKill9 kills; it does nothing unless
// started by it.
func TestKill9Worker(t *testing.T) {
	dir := os.Getenv("BLOBSTORE_KILL9_DIR")
	if dir == "" {
		t.Skip("started by TestKill9 only")
	}
	var seed uint64
	fmt.Sscan(os.Getenv("BLOBSTORE_KILL9_SEED"), &seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	f := openFixture(t, dir, os.Getenv("BLOBSTORE_KILL9_TENANT"))
	ctx := context.Background()
	shared := make([][]byte, 8)
	for i := range shared {
		shared[i] = randomBytes(100<<10 + rng.IntN(300<<10))
	}
	var mine []string
	for i := 0; ; i++ {
		var items []item
		for j := range 3 + rng.IntN(6) {
			if rng.IntN(2) == 0 {
				items = append(items, item{fmt.Sprintf("s%d", j), shared[rng.IntN(len(shared))]})
			} else {
				items = append(items, item{fmt.Sprintf("n%d", j), randomBytes(rng.IntN(600 << 10))})
			}
		}
		snap := f.backup(fmt.Sprintf("po_%d", rng.IntN(3)), items...)
		fmt.Printf("committed %s\n", snap.ID)
		mine = append(mine, snap.ID)
		if len(mine) > 3 {
			victim := mine[rng.IntN(len(mine)-1)]
			mine = slicesDelete(mine, victim)
			fmt.Printf("forgetting %s\n", victim)
			if err := f.store.ForgetSnapshots(ctx, f.tenant, []string{victim}); err != nil {
				t.Fatal(err)
			}
		}
		if i%2 == 1 {
			if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func slicesDelete(list []string, v string) []string {
	out := list[:0]
	for _, s := range list {
		if s != v {
			out = append(out, s)
		}
	}
	return out
}
