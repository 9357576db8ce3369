package agentapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"backstop/agentapi"
	"backstop/assets"
)

func TestInstallFiles(t *testing.T) {
	data := t.TempDir()
	exe := filepath.Join(t.TempDir(), "backstop")
	os.WriteFile(exe, []byte("the appliance binary"), 0o755)
	os.MkdirAll(filepath.Join(data, "install"), 0o700)
	os.WriteFile(filepath.Join(data, "install", "restic-linux-arm64"), []byte("restic for arm"), 0o644)
	srv := httptest.NewServer(&agentapi.Install{DataDir: data, Executable: exe, Script: assets.AgentInstallScript})
	defer srv.Close()

	get := func(path string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
			req.Host = hdr[1]
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

	own := "backstop-" + runtime.GOOS + "-" + runtime.GOARCH
	code, sums := get("/install/SHA256SUMS")
	want := sum("restic for arm") + "  restic-linux-arm64\n"
	if code != 200 || !strings.Contains(sums, sum("the appliance binary")+"  "+own+"\n") || !strings.Contains(sums, want) {
		t.Fatalf("SHA256SUMS: %d\n%s", code, sums)
	}
	if code, body := get("/install/bin/" + own); code != 200 || body != "the appliance binary" {
		t.Fatalf("own binary: %d %q", code, body)
	}
	for _, bad := range []string{"/install/bin/../backstop.db", "/install/bin/SHA256SUMS", "/install/bin/nope", "/install/other"} {
		if code, _ := get(bad); code != 404 {
			t.Errorf("%s: %d, want 404", bad, code)
		}
	}
	code, script := get("/install/agent.sh")
	if code != 200 || !strings.Contains(script, `SERVER="`+srv.URL+`"`) || !strings.HasPrefix(script, "#!/bin/sh") {
		t.Fatalf("agent.sh: %d %.200s", code, script)
	}
	// A Host header is the caller's: nothing but URL characters reaches the script.
	if _, script := get("/install/agent.sh", "Host", `x";rm -rf /;"`); !strings.Contains(script, `SERVER=""`) {
		t.Fatalf("hostile Host pasted into the script")
	}
}
