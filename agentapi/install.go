package agentapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Install serves /install/: the install script, the binaries it downloads,
// and their SHA256SUMS. The binaries are the appliance's own executable,
// offered as backstop-<goos>-<goarch> for its own platform, and every
// regular file in DataDir/install/ (where the release build puts the other
// platforms' agents and the restic binaries: restic-<os>-<arch>). A file in
// DataDir/install/ wins over the executable of the same name.
type Install struct {
	DataDir   string
	PublicURL string
	// Script is the install script (assets.AgentInstallScript); its
	// __BACKSTOP_SERVER__ is replaced by the appliance's address.
	Script string
	// Executable is the running binary; empty means os.Executable().
	Executable string

	mu   sync.Mutex
	sums map[string]cachedSum // by path
}

type cachedSum struct {
	size  int64
	mtime time.Time
	sum   string
}

var installName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// files maps each offered file name to its path on disk.
func (in *Install) files() map[string]string {
	out := map[string]string{}
	exe := in.Executable
	if exe == "" {
		exe, _ = os.Executable()
	}
	if exe != "" {
		out[AgentBinaryName(runtime.GOOS, runtime.GOARCH)] = exe
	}
	dir := filepath.Join(in.DataDir, "install")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsRegular() && installName.MatchString(e.Name()) && e.Name() != "SHA256SUMS" {
			out[e.Name()] = filepath.Join(dir, e.Name())
		}
	}
	return out
}

// Sum returns the SHA-256 of an offered file, hashing it once per change.
func (in *Install) Sum(name string) (string, bool) {
	path, ok := in.files()[name]
	if !ok {
		return "", false
	}
	sum, err := in.sumOf(path)
	return sum, err == nil
}

func (in *Install) sumOf(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	in.mu.Lock()
	c, ok := in.sums[path]
	in.mu.Unlock()
	if ok && c.size == st.Size() && c.mtime.Equal(st.ModTime()) {
		return c.sum, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	in.mu.Lock()
	if in.sums == nil {
		in.sums = map[string]cachedSum{}
	}
	in.sums[path] = cachedSum{size: st.Size(), mtime: st.ModTime(), sum: sum}
	in.mu.Unlock()
	return sum, nil
}

// ServeHTTP serves GET /install/agent.sh, /install/SHA256SUMS and
// /install/bin/<file>. No credentials: the files are public, and the
// script verifies every download against SHA256SUMS.
func (in *Install) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "only GET")
		return
	}
	switch p := r.URL.Path; {
	case p == "/install/agent.sh":
		w.Header().Set("Content-Type", "text/x-shellscript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		io.WriteString(w, strings.Replace(in.Script, "__BACKSTOP_SERVER__", in.server(r), 1))
	case p == "/install/SHA256SUMS":
		files := in.files()
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		for _, n := range names {
			if sum, err := in.sumOf(files[n]); err == nil {
				fmt.Fprintf(w, "%s  %s\n", sum, n)
			}
		}
	case strings.HasPrefix(p, "/install/bin/"):
		name := strings.TrimPrefix(p, "/install/bin/")
		path, ok := in.files()[name]
		if !installName.MatchString(name) || !ok {
			writeError(w, http.StatusNotFound, "not_found", "no such install file")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		http.ServeFile(w, r, path)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such install file")
	}
}

// safeURL limits what is pasted into the script: the Host header is the
// caller's, so anything outside URL characters is dropped.
var safeURL = regexp.MustCompile(`^https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~/\-]*)?$`)

func (in *Install) server(r *http.Request) string {
	base := strings.TrimRight(in.PublicURL, "/")
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	if !safeURL.MatchString(base) {
		return ""
	}
	return base
}
