// Package dovecottest starts a real Dovecot (Debian's dovecot-imapd) for
// tests: its own process with a generated configuration in a temporary
// directory, plain IMAP and implicit-TLS listeners on free loopback ports,
// a self-signed certificate, users in a passwd-file and maildir mailboxes.
// Tests of any package can use it; under CI=true a missing Dovecot fails
// the test instead of skipping it.
package dovecottest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"backstop/e2e/tool"
)

// Server is a running Dovecot.
type Server struct {
	Host    string // 127.0.0.1
	Port    int    // plain IMAP (STARTTLS offered)
	TLSPort int    // implicit TLS
	// Fingerprint is the lowercase hex SHA-256 of the server certificate.
	Fingerprint string
	Dir         string

	t     testing.TB
	cmd   *exec.Cmd
	mu    sync.Mutex
	users map[string]string
	seq   atomic.Int64
	uid   int // owner of mail files written directly; -1: the current user
	gid   int
}

// Start runs a Dovecot until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := "/usr/sbin/dovecot"
	if _, err := os.Stat(bin); err != nil {
		bin = tool.RequireTool(t, "dovecot", "dovecot-imapd")
	}
	dir, err := os.MkdirTemp("", "dovecot-")
	if err != nil {
		t.Fatal(err)
	}
	// The base directory holds unix sockets, whose paths must stay short,
	// so it lives under /tmp rather than t.TempDir's long paths.
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Host: "127.0.0.1", Dir: dir, t: t, users: map[string]string{}}
	for _, d := range []string{"run", "state", "mail", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	certPEM, keyPEM, fp := selfSigned(t)
	s.Fingerprint = fp
	os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o644)
	os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "users"), nil, 0o644)

	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	// Dovecot refuses to run its login and internal processes as root: as
	// root (CI), they run as the users the Debian package creates.
	internalUser, internalGroup, loginUser := u.Username, g.Name, u.Username
	mailUID, mailGID := u.Uid, u.Gid
	s.uid, s.gid = -1, -1
	if u.Uid == "0" {
		internalUser, internalGroup, loginUser = firstUser("dovecot", "nobody"), firstGroup("dovecot", "nogroup"), firstUser("dovenull", "nobody")
		os.Chmod(dir, 0o755)
		// Nor does it give mail processes uid 0: mail belongs to nobody.
		if nb, err := user.Lookup("nobody"); err == nil {
			mailUID, mailGID = nb.Uid, nb.Gid
			fmt.Sscan(mailUID, &s.uid)
			fmt.Sscan(mailGID, &s.gid)
			for _, d := range []string{"mail", "home"} {
				os.Chown(filepath.Join(dir, d), s.uid, s.gid)
			}
		}
	}
	for attempt := 0; ; attempt++ {
		s.Port, s.TLSPort = freePort(t), freePort(t)
		conf := fmt.Sprintf(configTemplate, dir, internalUser, internalGroup, s.Port, s.TLSPort, mailUID, mailGID, loginUser)
		confPath := filepath.Join(dir, "dovecot.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s.cmd = exec.Command(bin, "-F", "-c", confPath)
		s.cmd.Stdout, s.cmd.Stderr = &out, &out
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children share the group
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { s.cmd.Wait(); close(exited) }()
		if waitListening(s.Host, s.Port, exited) && waitListening(s.Host, s.TLSPort, exited) {
			t.Cleanup(func() { s.stop(exited) })
			return s
		}
		s.stop(exited)
		if attempt == 2 {
			log, _ := os.ReadFile(filepath.Join(dir, "dovecot.log"))
			t.Fatalf("dovecot did not start: %s\n%s", out.String(), log)
		}
	}
}

// stop ends the master (SIGTERM) and then its whole process group: the
// master alone can take seconds to wind its children down.
func (s *Server) stop(exited <-chan struct{}) {
	pgid := s.cmd.Process.Pid
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(500 * time.Millisecond):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
}

// CONDSTORE and QRESYNC are built into Dovecot 2.3's imap (no plugin); the
// namespace separator is "." as in Dovecot's maildir default.
const configTemplate = `
base_dir = %[1]s/run
state_dir = %[1]s/state
log_path = %[1]s/dovecot.log
protocols = imap
listen = 127.0.0.1
default_internal_user = %[2]s
default_internal_group = %[3]s
default_login_user = %[8]s
first_valid_uid = 0
first_valid_gid = 0
ssl = yes
ssl_cert = <%[1]s/cert.pem
ssl_key = <%[1]s/key.pem
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_cache_size = 0
auth_failure_delay = 0
mail_location = maildir:%[1]s/mail/%%u
# Keep appended messages' CRLF line ends on disk, so a test can compare a
# restored message's file with what was backed up byte for byte.
mail_save_crlf = yes
mail_max_userip_connections = 50
namespace inbox {
  inbox = yes
  separator = .
}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[1]s/users
}
userdb {
  driver = static
  args = uid=%[6]s gid=%[7]s home=%[1]s/home/%%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[4]d
  }
  inet_listener imaps {
    address = 127.0.0.1
    port = %[5]d
    ssl = yes
  }
}
service imap {
  process_limit = 100
}
`

func firstUser(names ...string) string {
	for _, n := range names {
		if _, err := user.Lookup(n); err == nil {
			return n
		}
	}
	return names[len(names)-1]
}

func firstGroup(names ...string) string {
	for _, n := range names {
		if _, err := user.LookupGroup(n); err == nil {
			return n
		}
	}
	return names[len(names)-1]
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(host string, port int, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, fmt.Sprint(port)), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func selfSigned(t testing.TB) (certPEM, keyPEM []byte, fingerprint string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "dovecottest"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), hex.EncodeToString(sum[:])
}

// AddUser adds (or updates) a user with a password. Dovecot re-reads the
// passwd-file when it changes, so a new password applies at the next login.
func (s *Server) AddUser(name, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[name] = password
	var b strings.Builder
	for u, p := range s.users {
		fmt.Fprintf(&b, "%s:{PLAIN}%s::::::\n", u, p)
	}
	path := filepath.Join(s.Dir, "users")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		s.t.Fatal(err)
	}
	// A later mtime than the previous file, so Dovecot notices the change
	// even within the same second.
	now := time.Now().Add(time.Duration(s.seq.Add(1)) * time.Second)
	os.Chtimes(tmp, now, now)
	if err := os.Rename(tmp, path); err != nil {
		s.t.Fatal(err)
	}
}

// SetPassword changes a user's password at the server. Dovecot looks at
// the passwd-file at most once a second, so it waits that long.
func (s *Server) SetPassword(name, password string) {
	s.AddUser(name, password)
	time.Sleep(1100 * time.Millisecond)
}

// Maildir returns the maildir of a user's folder on disk ("" or "INBOX" is
// the inbox; other names use the "." separator and ASCII only, as maildir++
// stores them).
func (s *Server) Maildir(user, folder string) string {
	root := filepath.Join(s.Dir, "mail", user)
	if folder == "" || strings.EqualFold(folder, "INBOX") {
		return root
	}
	return filepath.Join(root, "."+folder)
}

// Deliver writes a message straight into a user's maildir folder (created
// if missing) with maildir flags (e.g. "S" for \Seen, "F" for \Flagged)
// and the INTERNALDATE date. Dovecot indexes it at the next SELECT or
// STATUS: the fastest way to fill a large mailbox.
func (s *Server) Deliver(user, folder string, msg []byte, flags string, date time.Time) {
	dir := s.Maildir(user, folder)
	for _, d := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			s.t.Fatal(err)
		}
	}
	if s.uid >= 0 {
		for p := dir; strings.HasPrefix(p, filepath.Join(s.Dir, "mail")+"/"); p = filepath.Dir(p) {
			os.Lchown(p, s.uid, s.gid)
		}
		for _, d := range []string{"cur", "new", "tmp"} {
			os.Lchown(filepath.Join(dir, d), s.uid, s.gid)
		}
	}
	if folder != "" && !strings.EqualFold(folder, "INBOX") {
		// A maildir++ folder is a folder once it has a maildirfolder file.
		f := filepath.Join(dir, "maildirfolder")
		if _, err := os.Stat(f); err != nil {
			os.WriteFile(f, nil, 0o644)
			if s.uid >= 0 {
				os.Lchown(f, s.uid, s.gid)
			}
		}
	}
	name := fmt.Sprintf("%d.M%dP%d.dovecottest,S=%d:2,%s", date.Unix(), s.seq.Add(1), os.Getpid(), len(msg), flags)
	path := filepath.Join(dir, "cur", name)
	if err := os.WriteFile(path, msg, 0o644); err != nil {
		s.t.Fatal(err)
	}
	if s.uid >= 0 {
		os.Lchown(path, s.uid, s.gid)
	}
	if err := os.Chtimes(path, date, date); err != nil {
		s.t.Fatal(err)
	}
}

// Log returns Dovecot's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "dovecot.log"))
	return string(b)
}

// Pid is the Dovecot master process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }
