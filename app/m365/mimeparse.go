package m365

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"

	"github.com/emersion/go-message/charset"
)

// parsedMessage is what a restore needs of a stored MIME message.
type parsedMessage struct {
	header      mail.Header
	text, html  string
	attachments []attachment
}

type attachment struct {
	name, contentType, contentID string
	inline                       bool
	data                         []byte
}

var wordDecoder = &mime.WordDecoder{CharsetReader: func(cs string, r io.Reader) (io.Reader, error) {
	return charset.Reader(cs, r)
}}

// maxParts bounds the parts walked in one message (hostile nesting).
const maxParts = 500

// parseMIME reads a message: the first text/plain and text/html bodies
// (decoded to UTF-8), and every other leaf part, or a part with a file
// name or Content-Disposition attachment, as an attachment. It fails only
// when the header cannot be read; broken parts become attachments of their
// raw bytes.
func parseMIME(raw []byte) (*parsedMessage, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	p := &parsedMessage{header: msg.Header}
	body, _ := io.ReadAll(msg.Body)
	parts := 0
	p.walk(textproto(msg.Header), body, &parts)
	return p, nil
}

// partHeader is the few fields of a part header the walk needs.
type partHeader interface{ Get(string) string }

func textproto(h mail.Header) partHeader { return h }

func (p *parsedMessage) walk(h partHeader, body []byte, parts *int) {
	*parts++
	if *parts > maxParts {
		return
	}
	ctype, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || ctype == "" {
		ctype, params = "text/plain", map[string]string{"charset": "us-ascii"}
	}
	if strings.HasPrefix(ctype, "multipart/") && params["boundary"] != "" {
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			part, err := mr.NextRawPart()
			if err != nil {
				return
			}
			b, err := io.ReadAll(part)
			if err != nil {
				return
			}
			p.walk(part.Header, b, parts)
		}
	}
	data := decodeTransfer(h.Get("Content-Transfer-Encoding"), body)
	disp, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	name := dparams["filename"]
	if name == "" {
		name = params["name"]
	}
	if name != "" {
		if d, err := wordDecoder.DecodeHeader(name); err == nil {
			name = d
		}
	}
	isAttachment := disp == "attachment" || name != ""
	if !isAttachment {
		switch ctype {
		case "text/plain":
			if p.text == "" {
				p.text = toUTF8(data, params["charset"])
				return
			}
		case "text/html":
			if p.html == "" {
				p.html = toUTF8(data, params["charset"])
				return
			}
		}
	}
	if name == "" {
		name = "attachment" + extensionOf(ctype)
	}
	cid := strings.Trim(h.Get("Content-ID"), "<> ")
	p.attachments = append(p.attachments, attachment{name: name, contentType: ctype, contentID: cid,
		inline: disp == "inline" && cid != "", data: data})
}

func extensionOf(ctype string) string {
	if ctype == "message/rfc822" {
		return ".eml"
	}
	if exts, _ := mime.ExtensionsByType(ctype); len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}

func decodeTransfer(enc string, body []byte) []byte {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "base64":
		clean := bytes.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
				return -1
			}
			return r
		}, body)
		out := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
		n, err := base64.StdEncoding.Decode(out, clean)
		if err != nil {
			if n2, err2 := base64.RawStdEncoding.Decode(out, bytes.TrimRight(clean, "=")); err2 == nil {
				return out[:n2]
			}
			return out[:n]
		}
		return out[:n]
	case "quoted-printable":
		if b, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body))); err == nil {
			return b
		}
	}
	return body
}

func toUTF8(b []byte, cs string) string {
	cs = strings.ToLower(strings.TrimSpace(cs))
	if cs == "" || cs == "utf-8" || cs == "us-ascii" || cs == "utf8" {
		return string(b)
	}
	r, err := charset.Reader(cs, bytes.NewReader(b))
	if err != nil {
		return string(b)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return string(b)
	}
	return string(out)
}

func decodeHeader(v string) string {
	if !strings.Contains(v, "=?") {
		return v
	}
	if d, err := wordDecoder.DecodeHeader(v); err == nil {
		return d
	}
	return v
}
