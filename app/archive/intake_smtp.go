package archive

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"backstop/app"

	"github.com/emersion/go-smtp"
)

// SMTPServer is the journaling listener (archive.smtp_listen): it accepts
// mail only for live smtp_journal channel addresses and answers 250 only
// after Ingest made the message durable.
type SMTPServer struct {
	s   *Service
	srv *smtp.Server
	ln  net.Listener
	wg  sync.WaitGroup
}

// SMTP answers.
var (
	errUnknownRecipient = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such recipient here"}
	errTooLarge         = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Message too large"}
	errTemporary        = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure, try again later"}
	errNoRecipient      = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 5, 1}, Message: "No valid recipients"}
)

// ListenSMTP opens the listener on addr ("host:port"; ":0" works) and
// serves until Close. tlsConfig, when not nil, offers STARTTLS.
func (s *Service) ListenSMTP(addr string, tlsConfig *tls.Config) (*SMTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	x := &SMTPServer{s: s, ln: ln}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{s: s, remote: c.Conn().RemoteAddr().String()}, nil
	}))
	srv.Domain = s.cfg.SMTPDomain
	if srv.Domain == "" {
		srv.Domain = "localhost"
	}
	srv.MaxMessageBytes = s.cfg.MaxBytes
	srv.MaxRecipients = 100
	srv.ReadTimeout = 5 * time.Minute
	srv.WriteTimeout = 5 * time.Minute
	srv.TLSConfig = tlsConfig
	srv.ErrorLog = slogLogger{s.log}
	x.srv = srv
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("archive: SMTP server", slog.Any("error", err))
		}
	}()
	return x, nil
}

// Addr is the listener's address.
func (x *SMTPServer) Addr() net.Addr { return x.ln.Addr() }

// Close stops accepting and waits, until ctx ends, for the sessions in
// progress (a message being ingested is finished or answered 4xx).
func (x *SMTPServer) Close(ctx context.Context) error {
	err := x.srv.Shutdown(ctx)
	if err != nil {
		x.srv.Close()
	}
	x.wg.Wait()
	return err
}

type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Printf(format string, v ...any) {
	l.l.Debug("archive: smtp", slog.Any("msg", v), slog.String("format", format))
}
func (l slogLogger) Println(v ...any) { l.l.Debug("archive: smtp", slog.Any("msg", v)) }

type smtpSession struct {
	s        *Service
	remote   string
	from     string
	channels []*Channel
	rcpts    map[string][]string // channel id -> addresses
}

func (ss *smtpSession) Reset() {
	ss.from, ss.channels, ss.rcpts = "", nil, nil
}

func (ss *smtpSession) Logout() error { return nil }

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.Reset()
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ctx := context.Background()
	ch, err := ss.s.cfg.Store.ArchiveChannelByAddress(ctx, strings.ToLower(strings.TrimSpace(to)))
	if app.ErrorCode(err) == app.ENOTFOUND {
		return errUnknownRecipient
	} else if err != nil {
		ss.s.log.Error("archive: SMTP recipient lookup", slog.Any("error", err))
		return errTemporary
	}
	if ss.rcpts == nil {
		ss.rcpts = map[string][]string{}
	}
	if _, ok := ss.rcpts[ch.ID]; !ok {
		ss.channels = append(ss.channels, ch)
	}
	ss.rcpts[ch.ID] = append(ss.rcpts[ch.ID], to)
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	ctx := context.Background()
	s := ss.s
	if len(ss.channels) == 0 {
		return errNoRecipient
	}
	env := func(ch *Channel) Envelope { return Envelope{MailFrom: ss.from, RcptTo: ss.rcpts[ch.ID]} }
	if len(ss.channels) == 1 {
		_, err := s.Ingest(ctx, ss.channels[0], env(ss.channels[0]), r)
		return ss.answer(ctx, ss.channels, err)
	}
	// Several channels: keep the bytes once, then one Ingest per channel.
	dir := filepath.Join(s.cfg.DataDir, "archive", "spool")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ss.answer(ctx, nil, err)
	}
	f, err := os.CreateTemp(dir, ".incoming-")
	if err != nil {
		return ss.answer(ctx, nil, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(f, io.LimitReader(r, s.cfg.MaxBytes+1)); err != nil {
		return ss.answer(ctx, ss.channels, err)
	}
	for _, ch := range ss.channels {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return ss.answer(ctx, nil, err)
		}
		if _, err := s.Ingest(ctx, ch, env(ch), f); err != nil {
			return ss.answer(ctx, ss.channels, err)
		}
	}
	return nil
}

// answer turns Ingest's error into the SMTP reply, counting rejections.
func (ss *smtpSession) answer(ctx context.Context, chs []*Channel, err error) error {
	if err == nil {
		return nil
	}
	var tl *TooLarge
	if errors.As(err, &tl) || errors.Is(err, smtp.ErrDataTooLarge) {
		for _, ch := range chs {
			if err := ss.s.cfg.Store.AddArchiveRejected(ctx, ch.ID, ss.s.cfg.Now()); err != nil {
				ss.s.log.Error("archive: counting a rejected message", slog.Any("error", err))
			}
		}
		return errTooLarge
	}
	ss.s.log.Error("archive: SMTP intake failed (answered 451)", slog.String("remote", ss.remote), slog.Any("error", err))
	return errTemporary
}
