package webhooks_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backstop/app/webhooks"
)

func TestSecretBoxKeyFile(t *testing.T) {
	dir := t.TempDir()
	box, err := webhooks.OpenSecretBox(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, webhooks.KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Errorf("key file mode %v size %d, want 0600 and 32 bytes", fi.Mode().Perm(), fi.Size())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	secret := webhooks.NewSecret()
	sealed := box.Seal("wh_a", secret)
	if bytes.Contains(sealed, []byte(secret)) || bytes.Contains(sealed, []byte(strings.TrimPrefix(secret, "whsec_"))) {
		t.Fatal("sealed secret contains the secret")
	}
	// A second open (a restart) reads the same key.
	again, err := webhooks.OpenSecretBox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Open("wh_a", sealed); err != nil || got != secret {
		t.Fatalf("reopened box: %q, %v", got, err)
	}
	if _, err := again.Open("wh_b", sealed); err == nil {
		t.Error("a sealed secret opened for another webhook")
	}
	other, _ := webhooks.OpenSecretBox(t.TempDir())
	if _, err := other.Open("wh_a", sealed); err == nil {
		t.Error("a sealed secret opened with another data directory's key")
	}
	if err := os.WriteFile(filepath.Join(dir, webhooks.KeyFileName), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := webhooks.OpenSecretBox(dir); err == nil {
		t.Error("a malformed key file was accepted")
	}
}

func TestSecretsNotInDatabase(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	w, secret := e.webhook(tenant, "http://127.0.0.1:9/hook")
	rotated, _, err := e.svc.RotateSecret(context.Background(), tenant, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.disp.Close()
	e.db.Close()
	for _, name := range []string{"backstop.db", "backstop.db-wal"} {
		raw, err := os.ReadFile(filepath.Join(e.dir, name))
		if err != nil {
			continue
		}
		for _, s := range []string{secret, rotated, strings.TrimPrefix(secret, "whsec_")} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s holds a secret in the clear", name)
			}
		}
	}
	if !strings.HasPrefix(secret, "whsec_") || len(secret) != len("whsec_")+44 {
		t.Errorf("secret %q is not whsec_ + base64 of 32 bytes", secret)
	}
}
