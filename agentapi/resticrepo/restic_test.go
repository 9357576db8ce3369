package resticrepo

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/e2e"
)

// resticBinary returns the restic client the tests drive. Under CI=true a
// missing restic fails the test: the protocol must be proven against the
// real client.
func resticBinary(t testing.TB) string {
	t.Helper()
	return e2e.RequireTool(t, "restic", "restic")
}

// restic runs the real client against repo with a private cache and home.
type restic struct {
	t    testing.TB
	bin  string
	repo string
	home string
}

func newRestic(t testing.TB, repo string) *restic {
	return &restic{t: t, bin: resticBinary(t), repo: repo, home: t.TempDir()}
}

// run returns restic's stdout and an error carrying its stderr.
func (r *restic) run(args ...string) (string, error) {
	cmd := exec.Command(r.bin, append([]string{"--no-cache", "-r", r.repo}, args...)...)
	cmd.Env = []string{"HOME=" + r.home, "RESTIC_PASSWORD=correct horse battery staple", "PATH=/usr/bin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r.t.Logf("restic %s: %v in %s", args[0], err, time.Since(start).Round(time.Millisecond))
	if err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// runRefused runs restic until the server has refused one of its requests
// (refused reports the server's count), then interrupts it, and returns
// restic's error. restic 0.14 retries a refused request with backoff for
// about 45 seconds before giving up; the interrupt skips that wait, and
// restic still removes its locks on the way out.
func (r *restic) runRefused(refused func() int64, args ...string) error {
	r.t.Helper()
	before := refused()
	cmd := exec.Command(r.bin, append([]string{"--no-cache", "-r", r.repo}, args...)...)
	cmd.Env = []string{"HOME=" + r.home, "RESTIC_PASSWORD=correct horse battery staple", "PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for refused() == before {
		select {
		case err := <-done:
			r.t.Fatalf("restic %s ended (%v) before the server refused anything:\n%s", args[0], err, out.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			r.t.Fatalf("restic %s: no refusal within 2 minutes", args[0])
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	err := <-done
	r.t.Logf("restic %s refused and interrupted: %v\n%s", args[0], err, out.String())
	return err
}

func (r *restic) must(args ...string) string {
	r.t.Helper()
	out, err := r.run(args...)
	if err != nil {
		r.t.Fatalf("restic %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (r *restic) snapshots() []string {
	r.t.Helper()
	var snaps []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.must("snapshots", "--json")), &snaps); err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	for _, s := range snaps {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestRealRestic drives restic 0.14 through the whole life of an agent's
// repository on 127.0.0.1: init, two backups, snapshots, restore, check;
// forget and prune are refused and leave the repository intact.
func TestRealRestic(t *testing.T) {
	e := newTestEnv(t, Options{})
	id, secret := e.endpoint()
	url := "rest:http://" + id + ":" + secret + "@" + e.srv.Listener.Addr().String() + PathPrefix + id + "/"
	r := newRestic(t, url)

	src := t.TempDir()
	writeRandomTree(t, src, 40, 64<<10)
	r.must("init")
	if _, err := r.run("init"); err == nil {
		t.Fatal("a second init succeeded")
	}
	r.must("backup", src)
	// The second backup drops half the files, so the first snapshot holds
	// data nothing else needs: something for prune to delete.
	removeHalf(t, src)
	must(t, os.WriteFile(filepath.Join(src, "added.txt"), []byte("second backup"), 0o600))
	r.must("backup", src)
	snaps := r.snapshots()
	if len(snaps) != 2 {
		t.Fatalf("snapshots = %v", snaps)
	}

	dst := t.TempDir()
	r.must("restore", "latest", "--target", dst)
	compareTrees(t, src, filepath.Join(dst, src))
	r.must("check", "--read-data")

	// Retention is the appliance's job: with agent credentials forget and
	// prune fail, and the repository stays whole and unlocked.
	refused := func() int64 { return e.h.Stats()[id].Refused }
	if err := r.runRefused(refused, "forget", "--keep-last", "1"); err == nil {
		t.Fatal("forget succeeded with agent credentials")
	}
	if got := r.snapshots(); len(got) != 2 {
		t.Fatalf("snapshots after refused forget = %v", got)
	}
	// The appliance forgets the first snapshot locally; an agent's prune of
	// the data that freed is refused.
	local := newRestic(t, filepath.Join(e.dir, id))
	local.must("forget", snaps[0])
	if err := r.runRefused(refused, "prune"); err == nil {
		t.Fatal("prune succeeded with agent credentials")
	}
	if got := r.snapshots(); len(got) != 1 || got[0] != snaps[1] {
		t.Fatalf("snapshots after refused prune = %v", got)
	}
	r.must("check", "--read-data")
	r.must("restore", "latest", "--target", t.TempDir())
	if locks, _ := os.ReadDir(filepath.Join(e.dir, id, "locks")); len(locks) != 0 {
		t.Fatalf("locks left behind: %d", len(locks))
	}
	if l := leftovers(t, e.dir); len(l) != 0 {
		t.Fatalf("temp files left: %v", l)
	}

	// Another endpoint's credentials open nothing here.
	other, otherSecret := e.endpoint()
	foreign := newRestic(t, "rest:http://"+other+":"+otherSecret+"@"+e.srv.Listener.Addr().String()+PathPrefix+id+"/")
	if _, err := foreign.run("snapshots"); err == nil {
		t.Fatal("another endpoint listed this repository's snapshots")
	}
}

// writeRandomTree writes n incompressible files of up to maxSize bytes in
// a few directories.
func writeRandomTree(t testing.TB, dir string, n, maxSize int) {
	t.Helper()
	for i := 0; i < n; i++ {
		sub := filepath.Join(dir, string(rune('a'+i%4)))
		must(t, os.MkdirAll(sub, 0o700))
		b := make([]byte, 1+i*maxSize/n)
		_, _ = rand.Read(b)
		must(t, os.WriteFile(filepath.Join(sub, "f"+string(rune('a'+i%26))+string(rune('0'+i/26))), b, 0o600))
	}
}

// removeHalf deletes every other file under dir.
func removeHalf(t testing.TB, dir string) {
	t.Helper()
	i := 0
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i%2 == 0 {
				must(t, os.Remove(p))
			}
			i++
		}
		return nil
	})
}

// compareTrees checks that every regular file under want exists under got
// with the same content.
func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(want, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("restored %s differs: %v", rel, err)
		}
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("compare: %v (%d files)", err, n)
	}
}
