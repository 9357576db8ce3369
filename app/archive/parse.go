package archive

import (
	"bufio"
	"bytes"
	"fmt"
	"html"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // charsets of headers and text parts
	"github.com/emersion/go-message/mail"
)

// Bounds of what Parse keeps.
const (
	maxBodyText  = 256 << 10
	maxPartDepth = 8
	maxParts     = 200
)

// Parse is documented in seam.go. It never panics: a panic inside the MIME
// readers on hostile input leaves what was read so far.
func Parse(raw []byte) (p Parsed) {
	pr := &parser{}
	defer func() {
		if recover() != nil {
			p = pr.result()
		}
	}()
	pr.message(raw, 0, true)
	return pr.result()
}

type parser struct {
	p     Parsed
	body  strings.Builder
	parts int
	addrs []string
}

func (pr *parser) result() Parsed {
	p := pr.p
	p.Body = pr.body.String()
	seen := map[string]bool{}
	for _, a := range append(append([]string{p.From}, p.To...), pr.addrs...) {
		if a = normAddr(a); a != "" && !seen[a] {
			seen[a] = true
			p.Custodians = append(p.Custodians, a)
		}
	}
	return p
}

// message reads one message (top level, or a message/rfc822 part).
func (pr *parser) message(raw []byte, depth int, top bool) {
	e, err := message.Read(bytes.NewReader(raw))
	if e == nil {
		_ = err
		return
	}
	h := mail.Header{Header: e.Header}
	journal := top && e.Header.Has("X-MS-Journal-Report")
	if !journal || pr.p.Subject == "" {
		pr.headers(h)
	}
	if journal {
		pr.journal(e, depth)
		return
	}
	pr.entity(e, depth)
}

func (pr *parser) headers(h mail.Header) {
	if s, err := h.Text("Subject"); err == nil || s != "" {
		pr.p.Subject = bound(s, 1000)
	} else {
		pr.p.Subject = bound(h.Get("Subject"), 1000)
	}
	if from := addressList(h, "From"); len(from) > 0 {
		pr.p.From = from[0]
	}
	pr.p.To = nil
	for _, k := range []string{"To", "Cc", "Bcc"} {
		pr.p.To = append(pr.p.To, addressList(h, k)...)
	}
	if d, err := h.Date(); err == nil && !d.IsZero() {
		d = d.UTC()
		pr.p.Date = &d
	}
	if id, err := h.MessageID(); err == nil && id != "" {
		pr.p.MessageID = bound(id, 1000)
	} else {
		pr.p.MessageID = bound(strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>"), 1000)
	}
}

var addrRE = regexp.MustCompile(`[A-Za-z0-9._%+\-=/'!#$&*?^{|}~]+@[A-Za-z0-9.\-]+`)

// addressList reads an address header, falling back to anything that looks
// like an address when the header does not parse.
func addressList(h mail.Header, key string) []string {
	list, err := h.AddressList(key)
	var out []string
	if err == nil {
		for _, a := range list {
			out = append(out, strings.ToLower(a.Address))
		}
		return out
	}
	for _, a := range addrRE.FindAllString(h.Get(key), 100) {
		out = append(out, strings.ToLower(a))
	}
	return out
}

func normAddr(a string) string {
	a = strings.ToLower(strings.TrimSpace(strings.Trim(strings.TrimSpace(a), "<>")))
	if !strings.Contains(a, "@") || strings.ContainsAny(a, " \t\r\n") {
		return ""
	}
	return a
}

// entity collects the text of e and its parts.
func (pr *parser) entity(e *message.Entity, depth int) {
	pr.parts++
	if depth > maxPartDepth || pr.parts > maxParts {
		return
	}
	t, params, _ := e.Header.ContentType()
	if mr := e.MultipartReader(); mr != nil {
		for {
			part, err := mr.NextPart()
			if err != nil && part == nil {
				return
			}
			pr.entity(part, depth+1)
		}
	}
	_ = params
	switch {
	case t == "message/rfc822" || t == "message/global":
		raw, _ := io.ReadAll(io.LimitReader(e.Body, parsePrefix))
		sub := &parser{parts: pr.parts}
		sub.message(raw, depth+1, false)
		pr.addrs = append(pr.addrs, sub.result().Custodians...)
		pr.text(sub.body.String())
	case t == "text/plain" || t == "":
		b, _ := io.ReadAll(io.LimitReader(e.Body, maxBodyText))
		pr.text(string(b))
	case t == "text/html":
		b, _ := io.ReadAll(io.LimitReader(e.Body, 4*maxBodyText))
		pr.text(stripHTML(string(b)))
	}
}

func (pr *parser) text(s string) {
	room := maxBodyText - pr.body.Len()
	if room <= 0 || strings.TrimSpace(s) == "" {
		return
	}
	if pr.body.Len() > 0 {
		pr.body.WriteByte('\n')
	}
	pr.body.WriteString(bound(s, room))
}

var (
	tagRE    = regexp.MustCompile(`(?is)<(script|style)[^>]*>.*?</(script|style)\s*>|<[^>]*>`)
	spacesRE = regexp.MustCompile(`[ \t\r\n]+`)
)

func stripHTML(s string) string {
	return strings.TrimSpace(spacesRE.ReplaceAllString(html.UnescapeString(tagRE.ReplaceAllString(s, " ")), " "))
}

// bound cuts s to at most n bytes, on a rune boundary.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// journal reads an Exchange journal report: part 1 is the envelope, part 2
// the original message (message/rfc822, possibly binary).
func (pr *parser) journal(e *message.Entity, depth int) {
	j := &Journal{Recipients: []JournalRecipient{}}
	pr.p.Journal = j
	mr := e.MultipartReader()
	if mr == nil {
		pr.envelope(j, e.Body)
		return
	}
	for i := 0; ; i++ {
		part, err := mr.NextPart()
		if part == nil {
			_ = err
			break
		}
		t, _, _ := part.Header.ContentType()
		switch {
		case i == 0 && (t == "text/plain" || t == ""):
			pr.envelope(j, part.Body)
		case t == "message/rfc822" || t == "message/global":
			raw, _ := io.ReadAll(io.LimitReader(part.Body, parsePrefix))
			pr.message(raw, depth+1, false)
		default:
			pr.entity(part, depth+1)
		}
	}
	if pr.p.Subject == "" {
		pr.p.Subject = j.Subject
	}
	if pr.p.MessageID == "" {
		pr.p.MessageID = j.MessageID
	}
	if pr.p.From == "" {
		pr.p.From = normAddr(j.Sender)
	}
}

// envelope parses the report's envelope lines.
func (pr *parser) envelope(j *Journal, r io.Reader) {
	sc := bufio.NewScanner(io.LimitReader(r, 4<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "sender":
			j.Sender = normAddr(v)
			pr.addrs = append(pr.addrs, j.Sender)
		case "subject":
			j.Subject = bound(v, 1000)
		case "message-id":
			j.MessageID = bound(strings.Trim(v, "<>"), 1000)
		case "on-behalf-of":
			j.OnBehalfOf = normAddr(v)
			pr.addrs = append(pr.addrs, j.OnBehalfOf)
		case "to", "cc", "bcc", "recipient":
			if len(j.Recipients) >= 10000 {
				continue
			}
			field := map[string]string{"to": "To", "cc": "Cc", "bcc": "Bcc", "recipient": "Recipient"}[strings.ToLower(strings.TrimSpace(k))]
			rc := JournalRecipient{Field: field}
			items := strings.Split(v, ",")
			rc.Address = normAddr(items[0])
			for _, it := range items[1:] {
				ek, ev, _ := strings.Cut(it, ":")
				switch strings.ToLower(strings.TrimSpace(ek)) {
				case "expanded":
					rc.Expanded = normAddr(ev)
				case "forwarded":
					rc.Forwarded = normAddr(ev)
				}
			}
			j.Recipients = append(j.Recipients, rc)
			pr.addrs = append(pr.addrs, rc.Address, rc.Expanded, rc.Forwarded)
		}
	}
}

// String is a one-line summary for logs and tests.
func (p Parsed) String() string {
	d := ""
	if p.Date != nil {
		d = p.Date.Format(time.RFC3339)
	}
	return fmt.Sprintf("subject=%q from=%s to=%v date=%s id=%s custodians=%v journal=%v", p.Subject, p.From, p.To, d, p.MessageID, p.Custodians, p.Journal != nil)
}
