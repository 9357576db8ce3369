package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With tls.mode files the appliance serves HTTPS with the given certificate,
// and its session cookie is Secure.
func TestServeTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	a := startAppliance(t, map[string]string{"SERVICE_TLS_MODE": "files", "SERVICE_TLS_CERT_FILE": certFile,
		"SERVICE_TLS_KEY_FILE": keyFile})
	base := strings.Replace(a.base, "http://", "https://", 1)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("GET /healthz over TLS: %d %+v", resp.StatusCode, resp.TLS)
	}
	// Plain HTTP on the TLS port is not served.
	if resp, err := http.Get(a.base + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on the TLS listener")
		}
	}

	a.admin("correct horse battery\n", "create-user", "--email", "tls@example.com", "--password-stdin")
	resp, err = client.Post(base+"/api/v1/session", "application/json",
		strings.NewReader(`{"email":"tls@example.com","password":"correct horse battery"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sign-in over TLS: %d", resp.StatusCode)
	}
	if c := resp.Header.Get("Set-Cookie"); !strings.Contains(c, "Secure") || !strings.Contains(c, "HttpOnly") {
		t.Errorf("session cookie under TLS: %q, want Secure and HttpOnly", c)
	}
}

func TestServeTLSWithMissingCertificateFails(t *testing.T) {
	e := env{stdin: strings.NewReader(""), stdout: &strings.Builder{}, stderr: &strings.Builder{}, getenv: func(k string) string {
		return map[string]string{"SERVICE_LISTEN": "127.0.0.1:0", "SERVICE_DATA_DIR": t.TempDir(), "SERVICE_TLS_MODE": "files",
			"SERVICE_TLS_CERT_FILE": "/nonexistent/cert.pem", "SERVICE_TLS_KEY_FILE": "/nonexistent/key.pem"}[k]
	}}
	err := run(t.Context(), []string{"serve"}, e)
	if err == nil || !strings.HasPrefix(err.Error(), "tls:") {
		t.Fatalf("serve with a missing certificate: %v, want a tls: error", err)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns a
// pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "backstop test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certFile, keyFile, pool
}
