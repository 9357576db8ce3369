package chain

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// maxStampBytes bounds a TSA's answer.
const maxStampBytes = 1 << 20

// Stamp asks the TSA at url for a time-stamp of SHA-256(body) (nonce,
// certReq) and returns the response DER and its genTime. The answer is
// checked like VerifyStamp checks it (with the certificates it carries)
// and its nonce must be the one sent.
func Stamp(ctx context.Context, client *http.Client, url string, body []byte) (tsr []byte, genTime time.Time, err error) {
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, time.Time{}, err
	}
	tsq, err := timestamp.CreateRequest(bytes.NewReader(body), &timestamp.RequestOptions{
		Hash: crypto.SHA256, Certificates: true, Nonce: nonce})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("time-stamp request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(tsq))
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/timestamp-query")
	req.Header.Set("Accept", "application/timestamp-reply")
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("time-stamp authority: %w", err)
	}
	defer resp.Body.Close()
	tsr, err = io.ReadAll(io.LimitReader(resp.Body, maxStampBytes+1))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("time-stamp authority: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("time-stamp authority: HTTP %s", resp.Status)
	}
	if len(tsr) > maxStampBytes {
		return nil, time.Time{}, errors.New("time-stamp authority: answer too large")
	}
	ts, err := checkStamp(tsr, body, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	if ts.Nonce == nil || ts.Nonce.Cmp(nonce) != 0 {
		return nil, time.Time{}, errors.New("time-stamp: the answer's nonce is not the request's")
	}
	return tsr, ts.Time, nil
}

// VerifyStamp checks tsr against body: imprint, signature, and the chain
// to roots with EKU timeStamping, verified at the stamp's own genTime (an
// expired TSA certificate does not break old evidence). roots nil: the
// certificates in the response are trusted as given (self-contained
// evidence; the auditor pins the TSA root separately).
func VerifyStamp(tsr, body []byte, roots *x509.CertPool) (genTime time.Time, err error) {
	ts, err := checkStamp(tsr, body, roots)
	if err != nil {
		return time.Time{}, err
	}
	return ts.Time, nil
}

func checkStamp(tsr, body []byte, roots *x509.CertPool) (*timestamp.Timestamp, error) {
	// ParseResponse checks the CMS signature against the signer certificate
	// the token carries, no more.
	ts, err := timestamp.ParseResponse(tsr)
	if err != nil {
		return nil, fmt.Errorf("time-stamp: %w", err)
	}
	if ts.HashAlgorithm != crypto.SHA256 {
		return nil, fmt.Errorf("time-stamp: imprint uses %v, want SHA-256", ts.HashAlgorithm)
	}
	sum := sha256.Sum256(body)
	if !bytes.Equal(ts.HashedMessage, sum[:]) {
		return nil, errors.New("time-stamp: the imprint is not the SHA-256 of the checkpoint")
	}
	p7, err := pkcs7.Parse(ts.RawToken)
	if err != nil {
		return nil, fmt.Errorf("time-stamp: %w", err)
	}
	signer := p7.GetOnlySigner()
	if signer == nil {
		return nil, errors.New("time-stamp: the token does not carry exactly one signer certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range p7.Certificates {
		inter.AddCert(c)
	}
	if roots == nil {
		roots = inter
	}
	// At genTime, not now: a TSA certificate that expired since keeps
	// vouching for what it stamped while it was valid.
	_, err = signer.Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: ts.Time,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping},
	})
	if err != nil {
		return nil, fmt.Errorf("time-stamp: TSA certificate at %s: %w", ts.Time.UTC().Format(time.RFC3339), err)
	}
	return ts, nil
}
