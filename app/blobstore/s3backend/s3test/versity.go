// Package s3test runs a real S3 server, versitygw with its posix backend,
// for tests of S3 storage targets: on 127.0.0.1 only, its data in the
// test's temporary directory, stopped when the test ends.
package s3test

import (
	"bytes"
	"context"
	"crypto/tls"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"backstop/app/blobstore/s3backend"
)

// InstallHint is how to get the server these tests drive.
const InstallHint = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// Server is a running (or stopped) versitygw. Stop and Start may be called
// any number of times, e.g. to simulate an outage; the port and the data
// stay the same.
type Server struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Bucket    string
	// HTTPClient trusts the server's certificate when it runs TLS
	// (StartVersityTLS); nil otherwise.
	HTTPClient *http.Client

	t    testing.TB
	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed when cmd has exited
	out    syncBuffer
}

// Binary returns the path of versitygw: on PATH, else in $HOME/go/bin or
// GOPATH/bin. Like e2e.RequireTool, under CI=true a missing binary fails
// the test, elsewhere it skips it with the install command.
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var dirs []string
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, gp := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("versitygw is required under CI=true (%s)", InstallHint)
	}
	t.Skipf("versitygw not installed (%s)", InstallHint)
	return ""
}

// StartVersity starts versitygw over plain http on a free port of
// 127.0.0.1 with a posix backend in a temporary directory, waits until it
// answers, creates a bucket and registers Stop with t.Cleanup.
func StartVersity(t testing.TB) *Server {
	return start(t, false, "")
}

// StartVersityTLS is StartVersity over https with a self-signed
// certificate for 127.0.0.1; Server.HTTPClient trusts it.
func StartVersityTLS(t testing.TB) *Server {
	return start(t, true, "")
}

// VirtualDomain is the base domain StartVersityVirtualHost serves buckets
// under: bucket.s3.backstop.test. Nothing resolves it: VirtualHostConfig's
// client dials the server's loopback address for every host name.
const VirtualDomain = "s3.backstop.test"

// StartVersityVirtualHost is StartVersity with virtual-host addressing
// (the bucket in the host name) enabled; use VirtualHostConfig.
func StartVersityVirtualHost(t testing.TB) *Server {
	return start(t, false, VirtualDomain)
}

func start(t testing.TB, useTLS bool, virtualDomain string) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{
		Endpoint:  addr,
		AccessKey: "backstoptestaccess",
		SecretKey: "backstop-test-secret-0123456789",
		Bucket:    "backstop-test",
		t:         t,
		bin:       bin,
	}
	s.args = []string{"--port", addr, "--quiet", "--keep-alive"}
	if virtualDomain != "" {
		s.args = append(s.args, "--virtual-domain", virtualDomain)
	}
	if useTLS {
		certFile, keyFile, client := selfSigned(t, dir)
		s.args = append(s.args, "--cert", certFile, "--key", keyFile)
		s.HTTPClient = client
	}
	s.args = append(s.args, "posix")
	// The posix backend keeps metadata in extended attributes; where the
	// temporary file system has none, a sidecar directory holds it.
	if err := unix.Setxattr(root, "user.backstop-probe", []byte("1"), 0); err != nil {
		side := filepath.Join(dir, "meta")
		if err := os.MkdirAll(side, 0o700); err != nil {
			t.Fatal(err)
		}
		s.args = append(s.args, "--sidecar", side)
	}
	s.args = append(s.args, root)
	t.Cleanup(s.Stop)
	s.Start()
	if _, err := s.client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatalf("versitygw: creating bucket %s: %v", s.Bucket, err)
	}
	return s
}

// Config is a storage-target configuration for the server's bucket.
func (s *Server) Config() s3backend.Config {
	return s3backend.Config{
		Endpoint:        s.Endpoint,
		Bucket:          s.Bucket,
		AccessKeyID:     s.AccessKey,
		SecretAccessKey: s.SecretKey,
		PathStyle:       true,
		TLS:             s.HTTPClient != nil,
		HTTPClient:      s.HTTPClient,
	}
}

// VirtualHostConfig is Config with virtual-host addressing: the endpoint
// is VirtualDomain (with the server's port), and the client connects every
// host name to the server on 127.0.0.1.
func (s *Server) VirtualHostConfig() s3backend.Config {
	c := s.Config()
	_, port, _ := net.SplitHostPort(s.Endpoint)
	c.Endpoint, c.PathStyle = net.JoinHostPort(VirtualDomain, port), false
	addr := s.Endpoint
	c.HTTPClient = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	return c
}

// URL is the server's base URL.
func (s *Server) URL() string {
	if s.HTTPClient != nil {
		return "https://" + s.Endpoint
	}
	return "http://" + s.Endpoint
}

// client is a raw S3 client for the test's own set-up calls.
func (s *Server) client() *s3.Client {
	o := s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}
	if s.HTTPClient != nil {
		o.HTTPClient = s.HTTPClient
	}
	return s3.New(o)
}

// Start starts the server (again) and waits until it answers HTTP. It
// fails the test if it does not within 20 seconds.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	cmd.Stdout = &s.out
	cmd.Stderr = &s.out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting versitygw: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		Proxy:           nil,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer probe.CloseIdleConnections()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := probe.Get(s.URL() + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-exited:
			s.cmd = nil
			s.t.Fatalf("versitygw exited at start (%v): %s", waitErr, s.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("versitygw did not answer on %s within 20s: %v\n%s", s.Endpoint, err, s.out.String())
		}
	}
}

// Stop stops the server (SIGTERM, SIGKILL after 5 seconds) and waits until
// it has exited, so its port is closed. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Output is what the server printed so far, for failure messages.
func (s *Server) Output() string { return s.out.String() }

// syncBuffer collects the server's output from its two pipes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
