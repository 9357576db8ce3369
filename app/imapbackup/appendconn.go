package imapbackup

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"backstop/app"
)

// appendConn is a connection of Backstop's own for appending messages:
// go-imap v2 sends one message per APPEND command, and Dovecot commits
// (and syncs) once per command, so restoring needs MULTIAPPEND (RFC 3502)
// with non-synchronising literals (LITERAL+), several commands in flight.
// It speaks just enough IMAP for that: greeting, STARTTLS, LOGIN,
// CAPABILITY, APPEND, LOGOUT.
type appendConn struct {
	a           Account
	conn        net.Conn
	br          *bufio.Reader
	bw          *bufio.Writer
	stop        func() bool
	tag         int
	mu          sync.Mutex
	cancelled   bool
	caps        map[string]bool
	literalPlus bool
	multiAppend bool
}

// responseTimeout bounds the wait for one answer; Dovecot answers a batch
// of appends in well under a second.
const responseTimeout = 2 * time.Minute

func dialAppend(ctx context.Context, a Account) (*appendConn, error) {
	conn, err := dial(ctx, a)
	if err != nil {
		return nil, err
	}
	c := &appendConn{a: a, conn: conn}
	c.stop = c.watch(ctx, conn)
	c.setConn(conn)
	fail := func(err error) (*appendConn, error) {
		c.close()
		return nil, classify(ctx, a, err)
	}
	greet, err := c.readResponse("*")
	if err != nil {
		return fail(err)
	}
	if greet.Status != "OK" && greet.Status != "PREAUTH" {
		return fail(fmt.Errorf("server greeting: %s %s", greet.Status, greet.Text))
	}
	if a.Security == SecurityStartTLS {
		if greet.Status == "PREAUTH" {
			return fail(errors.New("server sent PREAUTH on an unencrypted connection"))
		}
		if r, err := c.command("STARTTLS"); err != nil {
			return fail(err)
		} else if r.Status != "OK" {
			c.close()
			return nil, app.Fail("imap.tls_failed", map[string]any{"host": a.Host, "port": a.Port, "reason": "the server refused STARTTLS: " + r.Text}, nil)
		}
		tc := tls.Client(conn, a.tlsConfig())
		hctx, cancel := context.WithTimeout(ctx, dialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			c.close()
			return nil, classifyTLS(ctx, a, err)
		}
		c.conn = tc
		c.stop()
		c.stop = c.watch(ctx, tc)
		c.setConn(tc)
	}
	if greet.Status != "PREAUTH" {
		user, err := c.astring(a.Username)
		if err != nil {
			return fail(err)
		}
		pass, err := c.astring(a.Password)
		if err != nil {
			return fail(err)
		}
		r, err := c.command("LOGIN " + user + " " + pass)
		if err != nil {
			return fail(err)
		}
		if r.Status != "OK" {
			c.close()
			return nil, app.Fail("imap.auth_failed", map[string]any{"host": a.Host, "username": a.Username},
				fmt.Errorf("the server refused the login: %s", r.Text))
		}
	}
	if _, err := c.command("CAPABILITY"); err != nil {
		return fail(err)
	}
	c.literalPlus = c.caps["LITERAL+"]
	c.multiAppend = c.caps["MULTIAPPEND"]
	return c, nil
}

// watch bounds the connection's life after ctx ends: appends already
// sent get cancelGrace to be answered (the restore reads those answers
// before it returns, so a cancelled restore leaves nothing landing later
// behind a resumed one); then every read and write fails.
func (c *appendConn) watch(ctx context.Context, conn net.Conn) func() bool {
	return context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cancelled = true
		c.mu.Unlock()
		conn.SetDeadline(time.Now().Add(cancelGrace))
	})
}

// cancelGrace is how long appends in flight may take after a cancel.
const cancelGrace = 10 * time.Second

// deadline sets a deadline unless the context ended (which set its own).
func (c *appendConn) deadline(read bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return
	}
	if read {
		c.conn.SetReadDeadline(time.Now().Add(responseTimeout))
	} else {
		c.conn.SetWriteDeadline(time.Now().Add(responseTimeout))
	}
}

func (c *appendConn) setConn(conn net.Conn) {
	c.br = bufio.NewReaderSize(conn, 16<<10)
	c.bw = bufio.NewWriterSize(conn, 64<<10)
}

// astring encodes a login argument: quoted when it can be, else a literal
// (sent synchronously unless the server has LITERAL+).
func (c *appendConn) astring(s string) (string, error) {
	if q, ok := quote(s); ok {
		return q, nil
	}
	return "", errors.New("user names and passwords with line breaks or non-ASCII characters are not supported for appends")
}

func (c *appendConn) nextTag() string {
	c.tag++
	return fmt.Sprintf("b%d", c.tag)
}

// command sends a one-line command and reads its tagged answer.
func (c *appendConn) command(cmd string) (response, error) {
	tag := c.nextTag()
	c.deadline(false)
	if _, err := c.bw.WriteString(tag + " " + cmd + "\r\n"); err != nil {
		return response{}, err
	}
	if err := c.bw.Flush(); err != nil {
		return response{}, err
	}
	return c.readResponse(tag)
}

// readResponse reads lines until the one tagged tag ("*" for the
// greeting), noting capabilities on the way. A BYE ends the connection.
func (c *appendConn) readResponse(tag string) (response, error) {
	for {
		c.deadline(true)
		line, err := c.readLine()
		if err != nil {
			return response{}, err
		}
		r, err := parseResponse(line)
		if err != nil {
			return response{}, err
		}
		if r.Code == "CAPABILITY" {
			c.caps = capsFrom(strings.Fields(r.CodeArgs))
		}
		if r.Tag == "*" && len(r.Fields) > 0 && strings.EqualFold(r.Fields[0], "CAPABILITY") {
			c.caps = capsFrom(r.Fields[1:])
		}
		switch {
		case r.Tag == tag:
			return r, nil
		case r.Tag == "*" && r.Status == "BYE":
			return r, fmt.Errorf("the server closed the connection: %s", r.Text)
		case r.Tag == "+" && tag != "+":
			return r, fmt.Errorf("unexpected continuation request: %s", r.Text)
		case tag == "+" && r.Tag != "*":
			return r, nil // the go-ahead, or the command's refusal
		}
	}
}

// readLine reads one response line, skipping literals inside it (an
// untagged response may carry some; none that an APPEND needs).
func (c *appendConn) readLine() (string, error) {
	var b strings.Builder
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		b.WriteString(line)
		if b.Len() > 1<<20 {
			return "", errors.New("response line too long")
		}
		n := literalAtEnd(line)
		if n < 0 {
			return b.String(), nil
		}
		if _, err := io.CopyN(io.Discard, c.br, n); err != nil {
			return "", err
		}
	}
}

// appendMsg is one message of an APPEND: its flags, date and bytes.
type appendMsg struct {
	flags []string
	date  time.Time
	size  int64
	body  func(w io.Writer) error // writes exactly size bytes
}

// sendAppend writes one APPEND command carrying msgs (MULTIAPPEND when
// more than one) and returns its tag; the answer is read by wait. With
// LITERAL+ nothing is read meanwhile, so several commands can be in
// flight; without it each literal waits for the server's go-ahead.
func (c *appendConn) sendAppend(mailbox string, msgs []appendMsg) (string, error) {
	tag := c.nextTag()
	q, ok := quote(encodeMailbox(mailbox))
	if !ok {
		return "", fmt.Errorf("mailbox name %q cannot be sent", mailbox)
	}
	c.deadline(false)
	c.bw.WriteString(tag + " APPEND " + q)
	for _, m := range msgs {
		var fl []string
		for _, f := range m.flags {
			if isAtomFlag(f) && !strings.EqualFold(f, `\Recent`) {
				fl = append(fl, f)
			}
		}
		c.bw.WriteString(" (" + strings.Join(fl, " ") + ")")
		if !m.date.IsZero() {
			c.bw.WriteString(` "` + m.date.Format(appendDate) + `"`)
		}
		if c.literalPlus {
			fmt.Fprintf(c.bw, " {%d+}\r\n", m.size)
		} else {
			fmt.Fprintf(c.bw, " {%d}\r\n", m.size)
			if err := c.bw.Flush(); err != nil {
				return "", err
			}
			r, err := c.readResponse("+")
			if err != nil {
				return "", err
			}
			if r.Tag != "+" {
				return "", fmt.Errorf("APPEND refused: %s %s", r.Status, r.Text)
			}
		}
		c.deadline(false)
		if err := m.body(c.bw); err != nil {
			return "", err
		}
	}
	c.bw.WriteString("\r\n")
	return tag, c.bw.Flush()
}

// wait reads the answer to a command sent earlier.
func (c *appendConn) wait(tag string) (response, error) { return c.readResponse(tag) }

func (c *appendConn) close() {
	if c.conn == nil {
		return
	}
	c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	c.bw.WriteString("z LOGOUT\r\n")
	c.bw.Flush()
	c.stop()
	c.conn.Close()
	c.conn = nil
}
