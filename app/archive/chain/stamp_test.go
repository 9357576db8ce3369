package chain

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"backstop/e2e/tool"
)

// testTSA is `openssl ts -reply` behind a loopback HTTP server, with a CA
// and a TSA certificate made here.
type testTSA struct {
	url  string
	ca   *x509.Certificate
	leaf *x509.Certificate
}

func newCert(t *testing.T, tmpl, parent *x509.Certificate, pub, priv any) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startTSA starts a TSA whose certificate is valid in [notBefore, notAfter]
// and carries the critical EKU timeStamping.
func startTSA(t *testing.T, notBefore, notAfter time.Time) *testTSA {
	t.Helper()
	openssl := tool.RequireTool(t, "openssl", "openssl")
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Backstop test TSA root"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	ca := newCert(t, caTmpl, caTmpl, caKey.Public(), caKey)
	tsaKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	// RFC 3161 wants the EKU critical (openssl refuses a TSA certificate
	// without): Go writes it non-critical, so it is added by hand.
	leaf := newCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "Backstop test TSA"},
		NotBefore: notBefore, NotAfter: notAfter, BasicConstraintsValid: true,
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtraExtensions: []pkix.Extension{criticalTimeStampingEKU(t)},
	}, ca, tsaKey.Public(), caKey)
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.Raw)
	writePEM(t, filepath.Join(dir, "tsa.crt"), "CERTIFICATE", leaf.Raw)
	k, _ := x509.MarshalPKCS8PrivateKey(tsaKey)
	writePEM(t, filepath.Join(dir, "tsa.key"), "PRIVATE KEY", k)
	os.WriteFile(filepath.Join(dir, "serial"), []byte("01\n"), 0o600)
	cnf := fmt.Sprintf(`[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
dir = %[1]s
serial = %[1]s/serial
crypto_device = builtin
signer_cert = %[1]s/tsa.crt
certs = %[1]s/ca.crt
signer_key = %[1]s/tsa.key
signer_digest = sha256
default_policy = 1.3.6.1.4.1.99999.1
digests = sha256
accuracy = secs:1
ordering = no
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
`, dir)
	os.WriteFile(filepath.Join(dir, "tsa.cnf"), []byte(cnf), 0o600)

	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, _ := io.ReadAll(r.Body)
		i := n.Add(1)
		qf, rf := filepath.Join(dir, fmt.Sprintf("q%d.tsq", i)), filepath.Join(dir, fmt.Sprintf("r%d.tsr", i))
		os.WriteFile(qf, q, 0o600)
		out, err := exec.Command(openssl, "ts", "-reply", "-config", filepath.Join(dir, "tsa.cnf"),
			"-queryfile", qf, "-out", rf).CombinedOutput()
		if err != nil {
			http.Error(w, string(out), http.StatusInternalServerError)
			return
		}
		b, _ := os.ReadFile(rf)
		w.Header().Set("Content-Type", "application/timestamp-reply")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return &testTSA{url: srv.URL, ca: ca, leaf: leaf}
}

// criticalTimeStampingEKU is extendedKeyUsage=critical,timeStamping.
func criticalTimeStampingEKU(t *testing.T) pkix.Extension {
	v, err := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: v}
}

func TestStampWithOpenSSLTSA(t *testing.T) {
	tsa := startTSA(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	body := []byte(Checkpoint{Origin: origin(), Size: 3}.Body())
	tsr, gen, err := Stamp(context.Background(), nil, tsa.url, body)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(gen); d < -5*time.Second || d > time.Minute {
		t.Fatalf("genTime %v", gen)
	}
	roots := x509.NewCertPool()
	roots.AddCert(tsa.ca)
	for name, pool := range map[string]*x509.CertPool{"self-contained": nil, "pinned root": roots} {
		got, err := VerifyStamp(tsr, body, pool)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got.Equal(gen) {
			t.Fatalf("%s: genTime %v, want %v", name, got, gen)
		}
	}
	if _, err := VerifyStamp(tsr, append(body, 'x'), nil); err == nil {
		t.Fatal("a stamp of another body verified")
	}
	other := startTSA(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other.ca)
	if _, err := VerifyStamp(tsr, body, otherRoots); err == nil {
		t.Fatal("a stamp verified against another TSA's root")
	}
	tsr[len(tsr)-10] ^= 1
	if _, err := VerifyStamp(tsr, body, nil); err == nil {
		t.Fatal("a corrupted stamp verified")
	}
}

// The TSA certificate expires a few seconds after the stamp: the stamp
// still verifies, because the chain is checked at genTime, not now.
func TestStampVerifiesAtGenTimeAfterTheTSACertificateExpired(t *testing.T) {
	notAfter := time.Now().Add(2 * time.Second).Truncate(time.Second)
	tsa := startTSA(t, time.Now().Add(-time.Hour), notAfter)
	body := []byte(Checkpoint{Origin: origin(), Size: 9}.Body())
	tsr, gen, err := Stamp(context.Background(), nil, tsa.url, body)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(notAfter) + 1100*time.Millisecond)
	roots := x509.NewCertPool()
	roots.AddCert(tsa.ca)
	if _, err := tsa.leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}}); err == nil {
		t.Fatal("the TSA certificate should have expired by now")
	}
	got, err := VerifyStamp(tsr, body, roots)
	if err != nil {
		t.Fatalf("stamp of %v under a certificate valid until %v: %v", gen, notAfter, err)
	}
	if !got.Equal(gen) {
		t.Fatalf("genTime %v, want %v", got, gen)
	}
}

// A TSA certificate that had already expired at genTime is refused.
func TestStampRefusesACertificateExpiredAtGenTime(t *testing.T) {
	tsa := startTSA(t, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	body := []byte(Checkpoint{Origin: origin(), Size: 1}.Body())
	if _, _, err := Stamp(context.Background(), nil, tsa.url, body); err == nil {
		t.Fatal("Stamp accepted a stamp under an expired certificate")
	}
}

func TestVerifyEvidenceChecksTheCheckpointStamp(t *testing.T) {
	tsa := startTSA(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	s := testSigner(t)
	l := newMessageLog(10)
	e := l.report(t, s, 2, 8, 10, 0)
	body, _ := noteBody(e.Checkpoint)
	tsr, gen, err := Stamp(context.Background(), nil, tsa.url, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	e.CheckpointStamp = tsr
	vr, err := VerifyEvidence(mustJSON(t, e), "", "")
	if err != nil {
		t.Fatalf("%v %q", err, vr.Problems)
	}
	if !vr.StampTime.Equal(gen) {
		t.Fatalf("stamp time %v, want %v", vr.StampTime, gen)
	}
	// A stamp of another checkpoint does not fit.
	other := l.report(t, s, 2, 9, 10, 0)
	other.CheckpointStamp = tsr
	other.Checkpoint = l.checkpoint(t, s, 9)
	verifyFails(t, other, "", "", "time-stamp")
}
