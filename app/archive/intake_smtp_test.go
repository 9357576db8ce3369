package archive_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/smtp"
	"runtime"
	"strings"
	"testing"
	"time"

	"backstop/app/archive"
)

func (f *fixture) listen(tlsConfig *tls.Config) string {
	f.t.Helper()
	srv, err := f.svc.ListenSMTP("127.0.0.1:0", tlsConfig)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	return srv.Addr().String()
}

// send delivers raw to rcpts and returns the DATA answer's error.
func send(addr string, rcpts []string, raw []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Mail("exchange@tenant.example"); err != nil {
		return err
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

func code(err error) int {
	var n int
	if err != nil {
		fmt.Sscanf(err.Error(), "%d", &n)
	}
	return n
}

func TestSMTPIntake(t *testing.T) {
	f := newFixture(t, opts{every: 50 * time.Millisecond, maxBytes: 1 << 20})
	ctx := context.Background()
	ch := f.channel()
	addr := f.listen(nil)

	raw := testMessage(1, 5000)
	if err := send(addr, []string{strings.ToUpper(ch.Address)}, raw); err != nil {
		t.Fatal(err)
	}
	sm, err := f.db.ArchiveMessageBySHA(ctx, f.tenant, sha(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.content(sm.ID), raw) {
		t.Fatal("stored bytes differ from the bytes sent")
	}

	if err := send(addr, []string{"nobody@journal.test"}, raw); code(err) != 550 {
		t.Fatalf("unknown recipient: %v, want 550", err)
	}
	if err := send(addr, []string{ch.Address}, testMessage(2, 2<<20)); code(err) != 552 {
		t.Fatalf("too large: %v, want 552", err)
	}
	// Malformed MIME and 8-bit headers are stored as they are.
	bad := []byte("Subject: caf\xe9 \xff\xfe\r\nFrom: <<<broken\r\nContent-Type: multipart/mixed; boundary=\"zz\r\n\r\n--zz\r\nContent-Type: text/plain; charset=klingon\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64\r\n--zz")
	if err := send(addr, []string{ch.Address}, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ArchiveMessageBySHA(ctx, f.tenant, sha(append(bad, "\r\n"...))); err != nil {
		t.Fatal(err)
	}
	chs, _ := f.db.ArchiveChannels(ctx, f.tenant)
	if chs[0].MessagesTotal != 2 || chs[0].Rejected24h != 1 || chs[0].Messages24h != 2 || chs[0].State != archive.ChannelOK {
		t.Fatalf("channel counts %+v", chs[0])
	}

	// Commands out of order are answered, the server keeps serving.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	rd.ReadString('\n')
	for _, cmd := range []string{"DATA", "RCPT TO:<" + ch.Address + ">", "BDAT 10 LAST", "MAIL FROM:<a@b>", "DATA", "QUIT"} {
		fmt.Fprintf(conn, "%s\r\n", cmd)
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if !strings.HasPrefix(line, "5") && !strings.HasPrefix(line, "2") {
			t.Fatalf("%s: %q", cmd, line)
		}
	}
	conn.Close()
	if err := send(addr, []string{ch.Address}, testMessage(3, 100)); err != nil {
		t.Fatal(err)
	}
}

func TestSMTPStartTLS(t *testing.T) {
	f := newFixture(t, opts{every: 50 * time.Millisecond})
	ch := f.channel()
	addr := f.listen(selfSigned(t))
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("no STARTTLS")
	}
	if err := c.StartTLS(&tls.Config{InsecureSkipVerify: true}); err != nil {
		t.Fatal(err)
	}
	c.Mail("a@b")
	if err := c.Rcpt(ch.Address); err != nil {
		t.Fatal(err)
	}
	w, _ := c.Data()
	w.Write(testMessage(1, 1000))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSMTPLargeMessage streams a 150 MB message: accepted, memory bounded.
func TestSMTPLargeMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("150 MB")
	}
	f := newFixture(t, opts{every: 50 * time.Millisecond})
	ch := f.channel()
	addr := f.listen(nil)
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Mail("a@b")
	c.Rcpt(ch.Address)
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "Subject: big\r\nContent-Type: text/plain\r\n\r\n")
	line := bytes.Repeat([]byte("x"), 998)
	line = append(line, "\r\n"...)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak uint64
	for n := 0; n < 150<<20; n += len(line) {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
		if n%(10<<20) < len(line) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap in use: before %d MiB, peak %d MiB", before.HeapInuse>>20, peak>>20)
	if peak > before.HeapInuse+64<<20 {
		t.Fatalf("heap grew to %d MiB", peak>>20)
	}
}

func selfSigned(t testing.TB) *tls.Config {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "journal.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"journal.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
