package archive_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app/archive"
	"backstop/app/archive/chain"
	"backstop/e2e/tool"
	"backstop/store/storetest"
)

// archiveTSA is `openssl ts -reply` behind a loopback HTTP server, with a
// CA and a TSA certificate made here (as chain's stamp_test.go startTSA).
type archiveTSA struct {
	url      string
	ca       *x509.Certificate
	requests atomic.Int64
}

func tsaCert(t *testing.T, tmpl, parent *x509.Certificate, pub, priv any) *x509.Certificate {
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

func tsaPEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func startArchiveTSA(t *testing.T) *archiveTSA {
	t.Helper()
	openssl := tool.RequireTool(t, "openssl", "openssl")
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Backstop test TSA root"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	ca := tsaCert(t, caTmpl, caTmpl, caKey.Public(), caKey)
	tsaKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	// extendedKeyUsage=critical,timeStamping (Go writes the EKU non-critical).
	eku, err := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
	if err != nil {
		t.Fatal(err)
	}
	leaf := tsaCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "Backstop test TSA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: eku}},
	}, ca, tsaKey.Public(), caKey)
	tsaPEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.Raw)
	tsaPEM(t, filepath.Join(dir, "tsa.crt"), "CERTIFICATE", leaf.Raw)
	k, _ := x509.MarshalPKCS8PrivateKey(tsaKey)
	tsaPEM(t, filepath.Join(dir, "tsa.key"), "PRIVATE KEY", k)
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

	tsa := &archiveTSA{ca: ca}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, _ := io.ReadAll(r.Body)
		i := tsa.requests.Add(1)
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
	tsa.url = srv.URL
	return tsa
}

// With Config.TSAURL set, the checkpointer time-stamps each checkpoint it
// signs; the evidence report of the period carries the stamp and
// chain.VerifyEvidence accepts it.
func TestArchiveCheckpointerStampsCheckpointsWithTSA(t *testing.T) {
	tsa := startArchiveTSA(t)
	ctx := context.Background()
	dir := t.TempDir()
	db := storetest.Open(t, dir)
	tenant := storetest.Tenant(t, db, "Stamped")
	signer, err := chain.LoadOrCreateSigner(filepath.Join(dir, "archive.key"), "backstop.test")
	if err != nil {
		t.Fatal(err)
	}
	origin := "backstop.test/archive/" + tenant
	svc, err := archive.New(archive.Config{Store: db, DataDir: dir, Signer: signer,
		Origin: func(id string) string { return "backstop.test/archive/" + id }, TSAURL: tsa.url,
		HTTP: &http.Client{Timeout: 10 * time.Second}, SMTPDomain: "journal.test", CheckpointEvery: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	ch, err := svc.CreateChannel(ctx, archive.ChannelSpec{TenantID: tenant, Kind: archive.KindSMTPJournal, DisplayName: "Exchange"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	for i := range 3 {
		raw := []byte(fmt.Sprintf("From: a@example.com\r\nTo: b@example.com\r\nSubject: stamped %d\r\nMessage-ID: <%d.%d@example.com>\r\n\r\nbody %d\r\n",
			i, time.Now().UnixNano(), i, i))
		if _, err := svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(raw)); err != nil {
			t.Fatal(err)
		}
	}

	// The background checkpointer (not an on-demand Checkpoint call) signs
	// and stamps a checkpoint of the 3 records.
	var cp *archive.StoredCheckpoint
	for range 1000 {
		if c, err := db.LatestArchiveCheckpoint(ctx, tenant); err == nil && c.Size == 3 {
			cp = c
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cp == nil {
		t.Fatal("no checkpoint of the 3 records")
	}
	if len(cp.TSR) == 0 || cp.TSATime == nil {
		t.Fatalf("checkpoint of size %d stored without a stamp (TSA saw %d requests)", cp.Size, tsa.requests.Load())
	}
	if d := time.Since(*cp.TSATime); d < -5*time.Second || d > time.Minute {
		t.Fatalf("stamp time %v", cp.TSATime)
	}
	opened, err := chain.OpenCheckpoint(cp.Note, signer.VerifierKey(), origin)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(tsa.ca)
	gen, err := chain.VerifyStamp(cp.TSR, []byte(opened.Body()), roots)
	if err != nil {
		t.Fatalf("the stored stamp does not verify over the checkpoint's body: %v", err)
	}
	if !gen.Equal(*cp.TSATime) {
		t.Fatalf("stamp genTime %v, stored %v", gen, cp.TSATime)
	}
	if _, err := chain.VerifyStamp(cp.TSR, []byte(chain.Checkpoint{Origin: origin, Size: 2, Root: opened.Root}.Body()), nil); err == nil {
		t.Fatal("the stamp verifies over another checkpoint's body")
	}
	if n, err := db.UnstampedArchiveCheckpoints(ctx, tenant); err != nil || len(n) != 0 {
		t.Fatalf("unstamped checkpoints %d, %v", len(n), err)
	}

	// The evidence report carries the stamp; VerifyEvidence checks it.
	report, err := svc.Evidence(ctx, tenant, start, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var e chain.Evidence
	if err := json.Unmarshal(report, &e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.CheckpointStamp, cp.TSR) || e.Checkpoint != cp.Note {
		t.Fatalf("evidence checkpointStamp %d bytes, checkpoint %q", len(e.CheckpointStamp), e.Checkpoint)
	}
	if !bytes.Contains(report, []byte(`"checkpointStamp"`)) {
		t.Fatal("the report JSON lacks checkpointStamp")
	}
	vr, err := chain.VerifyEvidence(report, signer.VerifierKey(), "")
	if err != nil {
		t.Fatalf("evidence does not verify: %v", err)
	}
	if vr.StampTime.IsZero() || !vr.StampTime.Equal(gen) {
		t.Fatalf("VerifyEvidence stamp time %v, want %v", vr.StampTime, gen)
	}

	// A stamp of another body is refused.
	var m map[string]any
	json.Unmarshal(report, &m)
	other, _, err := chain.Stamp(ctx, nil, tsa.url, []byte("not the checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	m["checkpointStamp"] = other
	forged, _ := json.Marshal(m)
	if _, err := chain.VerifyEvidence(forged, signer.VerifierKey(), ""); err == nil {
		t.Fatal("evidence with another body's stamp verified")
	}
}
