package imapbackup

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"io"
	"mime"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-message/charset"
)

// Item kinds of an IMAP snapshot.
const (
	KindFolder  = "folder"
	KindMessage = "message"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// MessageItemID is the stable, URL-safe id of a message: the same folder,
// UIDVALIDITY and UID give the same id in every snapshot, so unchanged
// messages keep their id and a new UIDVALIDITY gives new ids.
func MessageItemID(folder string, uidValidity, uid uint32) string {
	h := sha256.New()
	h.Write([]byte(folder))
	var b [9]byte
	binary.BigEndian.PutUint32(b[1:], uidValidity)
	binary.BigEndian.PutUint32(b[5:], uid)
	h.Write(b[:])
	return "m" + idEncoding.EncodeToString(h.Sum(nil)[:15])
}

// FolderItemID is the stable id of a folder item, from its path.
func FolderItemID(path string) string {
	sum := sha256.Sum256([]byte("folder\x00" + path))
	return "f" + idEncoding.EncodeToString(sum[:15])
}

// folderPath turns a server mailbox name into the snapshot's path, with
// "/" as the separator whatever the server's delimiter is.
func folderPath(mailbox string, delim rune) string {
	if delim == 0 || delim == '/' {
		return mailbox
	}
	return strings.ReplaceAll(mailbox, string(delim), "/")
}

// lastSegment is the folder's own name within its path.
func lastSegment(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// maxHeader is how much of a message is kept to read its header from.
const maxHeader = 64 << 10

// headerCapture keeps the start of a message, up to the end of its header
// (or maxHeader bytes), while the whole message streams past.
type headerCapture struct {
	buf  []byte
	done bool
}

func (h *headerCapture) Write(p []byte) (int, error) {
	if h.done {
		return len(p), nil
	}
	room := maxHeader - len(h.buf)
	chunk := p
	if len(chunk) > room {
		chunk = chunk[:room]
	}
	start := len(h.buf) - 3
	if start < 0 {
		start = 0
	}
	h.buf = append(h.buf, chunk...)
	if i := headerEnd(h.buf[start:]); i >= 0 {
		h.buf = h.buf[:start+i]
		h.done = true
	} else if len(h.buf) >= maxHeader {
		h.done = true
	}
	return len(p), nil
}

// headerEnd is the index of the blank line ending a header, or -1.
func headerEnd(b []byte) int {
	if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
		return i + 2
	}
	if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
		return i + 1
	}
	return -1
}

// headerFields are the fields the snapshot shows of a message.
type headerFields struct {
	Subject, From, Date, MessageID string
}

var wordDecoder = &mime.WordDecoder{CharsetReader: func(cs string, r io.Reader) (io.Reader, error) {
	return charset.Reader(cs, r)
}}

// parseHeader reads Subject, From, Date and Message-ID from a message's
// header block. It never fails: malformed lines are skipped, undecodable
// encoded words are kept as they are, and a field missing is empty.
func parseHeader(b []byte) headerFields {
	var f headerFields
	if i := headerEnd(b); i >= 0 {
		b = b[:i]
	}
	var name string
	var value strings.Builder
	flush := func() {
		if name == "" {
			return
		}
		v := strings.TrimSpace(value.String())
		switch strings.ToLower(name) {
		case "subject":
			if f.Subject == "" {
				f.Subject = decodeWords(v)
			}
		case "from":
			if f.From == "" {
				f.From = decodeWords(v)
			}
		case "date":
			if f.Date == "" {
				if t, err := mail.ParseDate(v); err == nil {
					f.Date = t.Format(time.RFC3339)
				}
			}
		case "message-id":
			if f.MessageID == "" {
				f.MessageID = v
			}
		}
		name = ""
		value.Reset()
	}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			if name != "" {
				value.WriteByte(' ')
				value.Write(bytes.TrimSpace(line))
			}
			continue
		}
		flush()
		i := bytes.IndexByte(line, ':')
		if i <= 0 {
			continue
		}
		name = string(bytes.TrimSpace(line[:i]))
		value.Write(line[i+1:])
	}
	flush()
	return f
}

func decodeWords(s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// cleanFlags drops \Recent (session-only, and not settable by APPEND).
func cleanFlags(flags []string) []string {
	out := flags[:0:0]
	for _, f := range flags {
		if !strings.EqualFold(f, `\Recent`) {
			out = append(out, f)
		}
	}
	return out
}
