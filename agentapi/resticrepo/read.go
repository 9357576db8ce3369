package resticrepo

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// serveFile answers GET and HEAD of config or a named file. http.ServeContent
// gives HEAD its Content-Length, answers Range requests with 206 (416 for an
// unsatisfiable range) and sends the body with sendfile where it can.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, t target, st *repoState) {
	root, err := h.openRepo(t.endpoint)
	if err != nil {
		h.fsError(w, r, "read", err)
		return
	}
	defer root.Close()
	f, err := root.Open(t.relPath())
	if err != nil {
		h.fsError(w, r, "read", err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		h.fsError(w, r, "read", err)
		return
	}
	if !fi.Mode().IsRegular() {
		h.fsError(w, r, "read", os.ErrNotExist)
		return
	}
	// Set before ServeContent so it does not sniff the (encrypted) content.
	w.Header().Set("Content-Type", "application/octet-stream")
	cw := &countingWriter{ResponseWriter: w}
	http.ServeContent(cw, r, "", time.Time{}, f)
	st.count(opRead, cw.n)
}

// countingWriter counts body bytes. It forwards ReadFrom so the response
// still uses sendfile.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) ReadFrom(src io.Reader) (int64, error) {
	n, err := io.Copy(c.ResponseWriter, src)
	c.n += n
	return n, err
}

// wantsV2 reports whether the Accept header names the v2 listing.
func wantsV2(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == mediaTypeV2 {
				return true
			}
		}
	}
	return false
}

// list answers GET /<type>/: v2 ([{"name","size"}]) when Accept names it,
// else v1 (["name"]), with the chosen media type in Content-Type. Only
// regular files with restic names are listed: temp files of uploads in
// progress and anything else are not. The list is streamed, so a
// repository of any size costs constant memory; a failure after the first
// byte aborts the connection rather than ending a JSON array that would
// look complete.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, t target, st *repoState) {
	root, err := h.openRepo(t.endpoint)
	if err != nil {
		h.fsError(w, r, "list", err)
		return
	}
	defer root.Close()
	dirs := []string{t.kind}
	if t.kind == "data" {
		dirs, err = dataDirs(root)
		if err != nil {
			h.fsError(w, r, "list", err)
			return
		}
	}
	v2 := wantsV2(r)
	if v2 {
		w.Header().Set("Content-Type", mediaTypeV2)
	} else {
		w.Header().Set("Content-Type", mediaTypeV1)
	}
	out := bufio.NewWriterSize(w, 64<<10)
	first := true
	started := false
	for _, dir := range dirs {
		entries, err := readDir(root, dir)
		if err != nil {
			if !started {
				h.fsError(w, r, "list", err)
				return
			}
			h.log.Error("listing failed mid-stream", slog.String("path", r.URL.Path), slog.Any("error", err))
			panic(http.ErrAbortHandler)
		}
		for _, e := range entries {
			name := e.Name()
			if !validName(name) || !e.Type().IsRegular() || (t.kind == "data" && name[:2] != dir[len("data/"):]) {
				continue
			}
			var size int64
			if v2 {
				fi, err := e.Info()
				if errors.Is(err, fs.ErrNotExist) {
					continue // a lock removed while we listed
				} else if err != nil {
					h.log.Error("listing failed mid-stream", slog.String("path", r.URL.Path), slog.Any("error", err))
					panic(http.ErrAbortHandler)
				}
				size = fi.Size()
			}
			if first {
				out.WriteByte('[')
				first, started = false, true
			} else {
				out.WriteByte(',')
			}
			// Names are hex, so they need no JSON escaping.
			if v2 {
				out.WriteString(`{"name":"`)
				out.WriteString(name)
				out.WriteString(`","size":`)
				out.WriteString(strconv.FormatInt(size, 10))
				out.WriteByte('}')
			} else {
				out.WriteByte('"')
				out.WriteString(name)
				out.WriteByte('"')
			}
		}
	}
	if first {
		out.WriteByte('[')
	}
	out.WriteString("]\n")
	_ = out.Flush()
	st.count(opList, 0)
}

// dataDirs lists data/'s two-hex-digit subdirectories.
func dataDirs(root *os.Root) ([]string, error) {
	entries, err := readDir(root, "data")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() && len(n) == 2 && validHex(n) {
			dirs = append(dirs, "data/"+n)
		}
	}
	return dirs, nil
}

func validHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// readDir lists a directory inside root; a missing type directory of an
// existing repository lists as empty.
func readDir(root *os.Root, dir string) ([]os.DirEntry, error) {
	d, err := root.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}
